// The inbox (#/inbox): every pending batch of every session the credential may see,
// filtered and ordered, with the batches resolved since the page opened. Opening a
// batch puts it in the same composer as the one-session page; answering, cancelling or
// Esc comes back to the list. New batches can ring and raise a browser notification
// while the tab is in the background.

import type { Requested, WhoAmIResponse } from "@askgate/client/proto";
import type { Composer } from "./composer.js";
import { type Session, title } from "./session.js";
import { View, h } from "./view.js";

export type Order = "oldest" | "newest";

export interface Filters {
  /** A session id prefix; empty: every session. */
  session: string;
  /** `key` (the batch has the label) or `key=value`; empty: any. */
  label: string;
  order: Order;
}

/** Whether a batch passes the filters. */
export function passes(batch: Requested, filters: Filters): boolean {
  if (!batch.sessionId.startsWith(filters.session.trim())) return false;
  const wanted = filters.label.trim();
  if (!wanted) return true;
  const at = wanted.indexOf("=");
  if (at < 0) return Object.hasOwn(batch.labels, wanted);
  const key = wanted.slice(0, at).trim();
  return Object.hasOwn(batch.labels, key) && batch.labels[key] === wanted.slice(at + 1).trim();
}

/** How long ago, in the largest whole unit: "just now", "12 s ago", "3 min ago", "2 h ago", "4 d ago". */
export function ago(since: Date, now: Date): string {
  const seconds = Math.max(0, Math.floor((now.getTime() - since.getTime()) / 1000));
  if (seconds < 10) return "just now";
  if (seconds < 60) return `${seconds} s ago`;
  if (seconds < 3600) return `${Math.floor(seconds / 60)} min ago`;
  if (seconds < 86_400) return `${Math.floor(seconds / 3600)} h ago`;
  return `${Math.floor(seconds / 86_400)} d ago`;
}

/** When the batch was asked (the server's clock), else the epoch. */
function askedAt(batch: Requested): Date {
  const at = batch.requestedAt;
  return at ? new Date(Number(at.seconds) * 1000 + Math.floor(at.nanos / 1e6)) : new Date(0);
}

/** Who the credential is, in one line. */
export function describeWho(who: WhoAmIResponse): string {
  const roles = who.roles.length > 0 ? who.roles.join(", ") : "none";
  const sees = who.everySession ? "every session" : `sessions ${who.sessions.join(", ")}`;
  return `${who.subject} · tenant ${who.tenant} · roles ${roles} · sees ${sees}`;
}

const SOUND_KEY = "askgate.sound";

/** A short tone through Web Audio (no file to fetch). */
function chime(): void {
  const Context = window.AudioContext;
  if (!Context) return;
  const context = new Context();
  const tone = context.createOscillator();
  const gain = context.createGain();
  tone.frequency.value = 880;
  gain.gain.value = 0.05;
  tone.connect(gain).connect(context.destination);
  tone.onended = () => void context.close();
  tone.start();
  tone.stop(context.currentTime + 0.15);
}

export class InboxView extends View {
  filters: Filters = { session: "", label: "", order: "oldest" };
  /** The highlighted batch of the list (its rpc_id). */
  private selected: string | undefined;
  private sound = localStorage.getItem(SOUND_KEY) === "on";
  private readonly signOut: () => void;
  /** Redraws now and then so that the ages move. */
  private readonly ticker: ReturnType<typeof setInterval>;

  constructor(root: HTMLElement, session: Session, signOut: () => void) {
    super(root, session);
    this.signOut = signOut;
    this.ticker = setInterval(() => {
      if (!this.session.current) this.render();
    }, 15_000);
  }

  override dispose(): void {
    super.dispose();
    clearInterval(this.ticker);
  }

  /** The batches the list shows: filtered, in the chosen order. */
  visible(): Composer[] {
    const shown = this.session.queue.filter((c) => passes(c.batch, this.filters));
    return this.filters.order === "newest" ? shown.reverse() : shown;
  }

  override render(): void {
    const waiting = this.session.queue.length;
    document.title = waiting > 0 ? `(${waiting}) askgate inbox` : "askgate inbox";
    super.render();
  }

  /** A batch arrived live: ring, and notify when the tab is in the background. */
  arrived(composer: Composer): void {
    if (this.sound) chime();
    if (!document.hidden || !("Notification" in window) || Notification.permission !== "granted") {
      return;
    }
    const note = new Notification(`askgate · ${composer.batch.sessionId}`, {
      body: title(composer),
      tag: composer.batch.rpcId,
    });
    note.onclick = () => {
      window.focus();
      this.session.open(composer.batch.rpcId);
      note.close();
    };
  }

  protected override idle(): string {
    return "inbox";
  }

  protected override bar(): HTMLElement {
    const who = this.session.whoami;
    return h(
      "header",
      { class: "bar" },
      h("span", { class: "brand" }, "askgate"),
      h("span", { class: "session" }, "inbox"),
      this.connection(),
      h(
        "div",
        { class: "who" },
        this.session.options.person !== undefined
          ? h("span", { "data-testid": "signed-in-as" }, `Signed in as ${this.session.options.person}`)
          : null,
        h("span", { "data-testid": "whoami", class: "muted" }, who ? describeWho(who) : ""),
        h(
          "span",
          { class: "controls" },
          this.notificationControl(),
          h(
            "button",
            {
              type: "button",
              class: "quiet",
              "aria-pressed": this.sound ? "true" : "false",
              "data-testid": "sound",
              onclick: () => {
                this.sound = !this.sound;
                localStorage.setItem(SOUND_KEY, this.sound ? "on" : "off");
                if (this.sound) chime();
                this.render();
              },
            },
            this.sound ? "Sound on" : "Sound off",
          ),
          // Only a credential this tab holds can be signed out of: a server without
          // authentication opens the inbox by itself.
          this.session.signedIn
            ? h("button", { type: "button", class: "quiet", "data-testid": "sign-out", onclick: this.signOut }, "Sign out")
            : null,
        ),
      ),
    );
  }

  private notificationControl(): HTMLElement | false {
    if (!("Notification" in window)) return false;
    switch (Notification.permission) {
      case "granted":
        return h("span", { class: "muted", "data-testid": "notifications" }, "Notifications on");
      case "denied":
        return h("span", { class: "muted", "data-testid": "notifications" }, "Notifications blocked");
      default:
        return h(
          "button",
          {
            type: "button",
            class: "quiet",
            "data-testid": "notifications",
            onclick: () => void Notification.requestPermission().then(() => this.render()),
          },
          "Turn on notifications",
        );
    }
  }

  protected override main(composer: Composer | undefined): HTMLElement {
    if (composer) {
      return h(
        "main",
        {},
        h(
          "div",
          { class: "crumbs" },
          h(
            "button",
            { type: "button", class: "quiet", "data-testid": "back", onclick: () => this.back() },
            "← Inbox",
          ),
          h("span", { class: "muted" }, "session ", h("code", {}, composer.batch.sessionId)),
        ),
        this.composer(composer),
      );
    }
    return h("main", { "data-testid": "inbox" }, this.filterBar(), this.list(), this.recent());
  }

  private filterBar(): HTMLElement {
    const set = (key: "session" | "label") => (event: Event) => {
      this.filters[key] = (event.target as HTMLInputElement).value;
      this.render();
    };
    return h(
      "section",
      { class: "card filters", "aria-label": "Filters" },
      h(
        "label",
        {},
        h("span", { class: "text-label" }, "Session starts with"),
        h("input", {
          class: "text",
          type: "text",
          "data-key": "filter-session",
          "data-testid": "filter-session",
          value: this.filters.session,
          oninput: set("session"),
        }),
      ),
      h(
        "label",
        {},
        h("span", { class: "text-label" }, "Label (key or key=value)"),
        h("input", {
          class: "text",
          type: "text",
          "data-key": "filter-label",
          "data-testid": "filter-label",
          value: this.filters.label,
          oninput: set("label"),
        }),
      ),
      h(
        "label",
        {},
        h("span", { class: "text-label" }, "Order"),
        h(
          "select",
          {
            class: "text",
            "data-key": "order",
            "data-testid": "order",
            onchange: (event: Event) => {
              this.filters.order = (event.target as HTMLSelectElement).value as Order;
              this.render();
            },
          },
          h("option", { value: "oldest", selected: this.filters.order === "oldest" }, "Oldest first"),
          h("option", { value: "newest", selected: this.filters.order === "newest" }, "Newest first"),
        ),
      ),
    );
  }

  private list(): HTMLElement {
    const shown = this.visible();
    if (!shown.some((c) => c.batch.rpcId === this.selected)) this.selected = shown[0]?.batch.rpcId;
    const total = this.session.queue.length;
    const heading =
      shown.length === total ? `Waiting (${total})` : `Waiting (${shown.length} of ${total})`;
    const connection = this.session.connection;
    const empty =
      connection.kind === "refused"
        ? h(
            "p",
            { class: "error", role: "alert" },
            `The server refused: ${connection.why}. `,
            h("button", { type: "button", class: "quiet", onclick: this.signOut }, "Sign in again"),
          )
        : h(
            "p",
            { class: "muted", "data-testid": "inbox-empty" },
            total === 0 ? "Nothing waiting. Questions from every session you may see appear here." : "No batch matches the filters.",
          );
    const now = new Date();
    return h(
      "section",
      { class: "card", "aria-label": "Waiting batches" },
      h("h2", {}, heading),
      shown.length === 0
        ? empty
        : h(
            "ol",
            { class: "rows" },
            ...shown.map((c) => {
              const batch = c.batch;
              const selected = batch.rpcId === this.selected;
              const count = batch.questions.length;
              const labels = Object.entries(batch.labels).sort(([a], [b]) => a.localeCompare(b));
              return h(
                "li",
                {},
                h(
                  "button",
                  {
                    type: "button",
                    class: `row${selected ? " selected" : ""}`,
                    "aria-current": selected ? "true" : undefined,
                    "data-testid": "batch",
                    "data-rpc": batch.rpcId,
                    "data-session": batch.sessionId,
                    "data-key": `batch-${batch.rpcId}`,
                    "data-autofocus": selected ? "" : undefined,
                    onclick: () => this.openBatch(batch.rpcId),
                  },
                  h("span", { class: "row-title" }, title(c)),
                  h(
                    "span",
                    { class: "row-meta muted" },
                    h("code", {}, batch.sessionId),
                    ` · ${ago(askedAt(batch), now)}`,
                    batch.agent?.agentId ? ` · agent ${batch.agent.agentId}` : "",
                    count > 1 ? ` · ${count} questions` : "",
                    c.phase.kind === "approved" ? " · you approved; waiting for the other approvers" : "",
                  ),
                  labels.length > 0 &&
                    h("span", { class: "row-labels" }, ...labels.map(([k, v]) => h("span", { class: "tag" }, v ? `${k}=${v}` : k))),
                ),
              );
            }),
          ),
      shown.length > 0 && h("p", { class: "muted keys" }, "j/k or ↑/↓ to move, Enter to open, Esc to come back."),
    );
  }

  private recent(): HTMLElement | false {
    const recent = this.session.recent;
    if (recent.length === 0) return false;
    return h(
      "section",
      { class: "card", "aria-label": "Recently resolved", "data-testid": "recent" },
      h("h2", {}, "Recently resolved"),
      h(
        "ol",
        { class: "rows" },
        ...recent.map((r) =>
          h(
            "li",
            { class: "resolved", "data-testid": "resolved", "data-rpc": r.rpcId },
            h("span", { class: "row-title" }, r.about),
            h(
              "span",
              { class: "row-meta muted" },
              h("code", {}, r.sessionId),
              ` · ${r.how} · ${r.at.toLocaleTimeString()}`,
            ),
          ),
        ),
      ),
    );
  }

  private openBatch(rpcId: string): void {
    this.selected = rpcId;
    this.session.open(rpcId);
  }

  private back(): void {
    this.session.open(undefined);
  }

  /** Moves the highlight by `step` through the shown batches and focuses it. */
  private move(step: number): void {
    const shown = this.visible();
    if (shown.length === 0) return;
    const at = shown.findIndex((c) => c.batch.rpcId === this.selected);
    const next = Math.min(shown.length - 1, Math.max(0, at + step));
    this.selected = shown[next].batch.rpcId;
    this.render();
    this.root.querySelector<HTMLElement>(".row.selected")?.focus();
  }

  protected override onKey(event: KeyboardEvent): void {
    if (event.defaultPrevented || event.ctrlKey || event.metaKey || event.altKey) return;
    const composer = this.session.current;
    const target = event.target as HTMLElement;
    const inField =
      target instanceof HTMLInputElement || target instanceof HTMLTextAreaElement || target instanceof HTMLSelectElement;
    if (composer) {
      // Esc leaves the batch (its drafts stay), except where Esc means something else:
      // the close dialog's "keep answering", or an input method's composition.
      if (event.key === "Escape" && composer.phase.kind !== "closing" && !event.isComposing) {
        event.preventDefault();
        this.back();
        return;
      }
      super.onKey(event);
      return;
    }
    if (inField) return;
    switch (event.key) {
      case "j":
      case "ArrowDown":
        event.preventDefault();
        this.move(1);
        return;
      case "k":
      case "ArrowUp":
        event.preventDefault();
        this.move(-1);
        return;
      case "Enter":
        // Enter on a row is its click.
        if (target instanceof HTMLButtonElement || !this.selected) return;
        event.preventDefault();
        this.openBatch(this.selected);
        return;
    }
  }
}
