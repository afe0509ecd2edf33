// Draws the session and the composer, and turns clicks and keys into composer and
// session actions. Every change redraws the page from the state; focus, the caret and
// an IME composition in progress survive a redraw.

import type { Requested } from "@askgate/client/proto";

import { type Approvals, type Composer, planApprove, recommended } from "./composer.js";
import { type Session, title } from "./session.js";

export type Child = Node | string | false | null | undefined;

/** Builds an element: attributes (`on*` functions become listeners), then children. */
export function h(tag: string, attrs: Record<string, unknown> = {}, ...children: Child[]): HTMLElement {
  const el = document.createElement(tag);
  for (const [name, value] of Object.entries(attrs)) {
    if (value === undefined || value === false || value === null) continue;
    if (name.startsWith("on") && typeof value === "function") {
      el.addEventListener(name.slice(2), value as EventListener);
    } else if (name === "value") {
      (el as HTMLInputElement).value = String(value);
    } else if (name === "checked") {
      (el as HTMLInputElement).checked = Boolean(value);
    } else {
      el.setAttribute(name, value === true ? "" : String(value));
    }
  }
  for (const child of children) {
    if (child === false || child === null || child === undefined) continue;
    el.append(child);
  }
  return el;
}

/** Enter that only confirms an IME candidate (isComposing, or keyCode 229 where the
 * browser reports the composition that way): it must never submit. */
export function composing(event: KeyboardEvent): boolean {
  return event.isComposing || event.keyCode === 229;
}

export class View {
  protected readonly root: HTMLElement;
  protected readonly session: Session;
  /** What was drawn last: a change of question or phase moves the focus. */
  private shown = "";
  /** An IME composition is in progress: redraws wait for its end. */
  private imeActive = false;
  private redrawPending = false;
  /** Removes the page-wide listeners when the view is replaced (another route). */
  private readonly listening = new AbortController();

  constructor(root: HTMLElement, session: Session) {
    this.root = root;
    this.session = session;
    const { signal } = this.listening;
    root.addEventListener(
      "compositionstart",
      () => {
        this.imeActive = true;
      },
      { signal },
    );
    root.addEventListener(
      "compositionend",
      () => {
        this.imeActive = false;
        if (this.redrawPending) this.render();
      },
      { signal },
    );
    document.addEventListener("keydown", (event) => this.onKey(event), { signal });
  }

  /** Stops listening: the page shows another view. */
  dispose(): void {
    this.listening.abort();
  }

  render(): void {
    if (this.imeActive) {
      this.redrawPending = true;
      return;
    }
    this.redrawPending = false;
    const focused = document.activeElement as HTMLElement | null;
    const focusKey = focused?.dataset?.key;
    // Only text fields have a selection (a checkbox's is null, and setting one throws).
    const selection =
      (focused instanceof HTMLInputElement || focused instanceof HTMLTextAreaElement) &&
      focused.selectionStart !== null
        ? [focused.selectionStart, focused.selectionEnd]
        : undefined;

    const composer = this.session.current;
    const shown = composer
      ? `${composer.batch.rpcId}/${composer.phase.kind}/${composer.item}`
      : this.idle();
    this.root.replaceChildren(this.bar(), this.notice(), this.main(composer));

    if (shown !== this.shown) {
      this.shown = shown;
      // A new question, phase or batch: focus where the human goes on from.
      this.root.querySelector<HTMLElement>("[data-autofocus]")?.focus();
      return;
    }
    if (focusKey) {
      const again = this.root.querySelector<HTMLElement>(`[data-key="${focusKey}"]`);
      again?.focus();
      if (
        selection &&
        (again instanceof HTMLInputElement || again instanceof HTMLTextAreaElement) &&
        again.selectionStart !== null
      ) {
        again.setSelectionRange(selection[0], selection[1]);
      }
    }
  }

  /** What the page shows without a batch in the composer; a change moves the focus. */
  protected idle(): string {
    return "empty";
  }

  protected bar(): HTMLElement {
    return h(
      "header",
      { class: "bar" },
      h("span", { class: "brand" }, "askgate"),
      h("span", { class: "session" }, "session ", h("code", {}, this.session.options.sessionId ?? "")),
      h("a", { class: "inbox-link", href: "#/inbox", "data-testid": "to-inbox" }, "Inbox"),
      this.connection(),
      this.session.options.person !== undefined
        ? h("span", { class: "who", "data-testid": "signed-in-as" }, `Signed in as ${this.session.options.person}`)
        : null,
    );
  }

  protected connection(): HTMLElement {
    const connection = this.session.connection;
    const [text, tone] = {
      connecting: ["Connecting…", "warn"],
      connected: ["Connected", "ok"],
      reconnecting: ["Reconnecting…", "warn"],
      refused: ["Refused", "error"],
    }[connection.kind];
    const why =
      connection.kind === "reconnecting" || connection.kind === "refused" ? connection.why : "";
    return h(
      "span",
      {
        class: `connection ${tone}`,
        role: "status",
        "data-testid": "connection",
        "data-resumed": connection.kind === "connected" ? String(connection.resumed) : undefined,
        title: why,
      },
      text,
    );
  }

  protected notice(): HTMLElement {
    const notice = this.session.notice;
    return h(
      "div",
      { class: "notices", "aria-live": "polite" },
      notice &&
        h(
          "div",
          { class: `notice ${notice.tone}`, "data-testid": "notice" },
          h("span", {}, h("strong", {}, notice.about), " — ", notice.text),
          h(
            "button",
            {
              class: "quiet",
              type: "button",
              "aria-label": "Dismiss the notice",
              onclick: () => this.session.dismissNotice(),
            },
            "×",
          ),
        ),
    );
  }

  protected main(composer: Composer | undefined): HTMLElement {
    const connection = this.session.connection;
    if (!composer) {
      const why =
        connection.kind === "refused"
          ? h("p", { class: "error", role: "alert" }, `The server refused this session: ${connection.why}`)
          : connection.kind === "reconnecting"
            ? h("p", { class: "muted" }, `Lost the connection (${connection.why}); retrying.`)
            : h("p", { class: "muted" }, "No questions waiting. An agent's questions in this session appear here.");
      return h("main", { "data-testid": "idle" }, h("section", { class: "card empty" }, why));
    }
    return h("main", {}, this.composer(composer), this.queue());
  }

  private queue(): HTMLElement | false {
    const waiting = this.session.queue.slice(1);
    if (waiting.length === 0) return false;
    return h(
      "aside",
      { class: "queue", "aria-label": "Waiting batches", "data-testid": "queue" },
      h("h2", {}, `${waiting.length} more waiting`),
      h("ol", {}, ...waiting.map((c) => h("li", {}, title(c), h("span", { class: "muted" }, ` · ${c.batch.questions.length} question${c.batch.questions.length === 1 ? "" : "s"}`)))),
    );
  }

  protected composer(c: Composer): HTMLElement {
    const sent = c.phase.kind === "sent";
    const body =
      c.phase.kind === "review"
        ? this.review(c)
        : c.phase.kind === "closing"
          ? this.closing(c, c.phase.reason)
          : c.phase.kind === "approved"
            ? approvedText(c)
            : this.question(c);
    return h(
      "section",
      {
        class: `card composer${sent ? " sent" : ""}`,
        "aria-label": "Questions from the agent",
        "aria-busy": sent ? "true" : undefined,
        "data-testid": "composer",
        "data-rpc": c.batch.rpcId,
      },
      this.steps(c),
      sent
        ? h(
            "p",
            { class: "waiting", role: "status", "data-testid": "waiting" },
            c.phase.kind === "sent" && c.phase.what === "cancel"
              ? "Cancelling… waiting for the server to confirm."
              : "Sending… waiting for the server to confirm.",
          )
        : body,
    );
  }

  /** Progress, a step per question, and the close control. */
  private steps(c: Composer): HTMLElement {
    const total = c.batch.questions.length;
    const where =
      c.phase.kind === "review" ? `Review · ${total} of ${total}` : `${c.item + 1} of ${total}`;
    const disabled = c.phase.kind === "sent" || c.phase.kind === "approved";
    return h(
      "div",
      { class: "steps" },
      h("span", { class: "progress", "data-testid": "progress" }, where),
      total > 1 &&
        h(
          "nav",
          { "aria-label": "Questions" },
          ...c.batch.questions.map((q, i) => {
            const status = c.drafts[i].status;
            const mark = status === "answered" ? " ✓" : status === "skipped" ? " (skipped)" : "";
            return h(
              "button",
              {
                type: "button",
                class: `step ${status}`,
                "aria-current": c.phase.kind === "question" && i === c.item ? "step" : undefined,
                disabled,
                "data-key": `step-${i}`,
                onclick: () => this.act(() => c.goTo(i)),
              },
              `${q.header || `Q${i + 1}`}${mark}`,
            );
          }),
        ),
      h(
        "button",
        {
          type: "button",
          class: "close",
          "aria-label": "Close: cancel this batch",
          title: "Close: cancel this batch",
          disabled,
          "data-key": "close",
          "data-testid": "close",
          onclick: () => this.act(() => c.close()),
        },
        "×",
      ),
    );
  }

  private question(c: Composer): HTMLElement {
    const q = c.question;
    const draft = c.draft;
    const approve = planApprove(q);
    const optionless = q.options.length === 0;
    const firstFocus = Math.max(
      0,
      q.options.findIndex((o) => draft.selected.includes(o.label)),
    );
    const options = q.options.map((option, i) => {
      const { text, recommended: isRecommended } = recommended(option.label);
      const chosen = draft.selected.includes(option.label);
      const parts: Child[] = [
        h("span", { class: "key", "aria-hidden": "true" }, i < 9 ? String(i + 1) : ""),
        h(
          "span",
          { class: "body" },
          h("span", { class: "label" }, text),
          isRecommended && h("span", { class: "badge", "data-testid": "recommended" }, "Recommended"),
          option.label === approve && h("span", { class: "badge approve" }, "Approves the plan"),
          option.description && h("span", { class: "description" }, option.description),
        ),
      ];
      const common = {
        class: `option${chosen ? " chosen" : ""}`,
        "data-key": `option-${i}`,
        "data-option": "",
        "data-autofocus": i === firstFocus ? "" : undefined,
      };
      if (q.multiSelect) {
        return h(
          "label",
          { class: `option-row${chosen ? " chosen" : ""}` },
          h("input", {
            ...common,
            class: "check",
            type: "checkbox",
            checked: chosen,
            onchange: () => this.act(() => c.toggle(option.label)),
          }),
          ...parts,
        );
      }
      return h(
        "button",
        {
          ...common,
          type: "button",
          "aria-pressed": chosen ? "true" : "false",
          onclick: () => this.act(() => c.choose(option.label)),
        },
        ...parts,
      );
    });
    const detail =
      q.detail &&
      (approve !== undefined
        ? h("div", { class: "plan" }, h("h3", {}, "The plan to review"), h("pre", {}, q.detail))
        : h("p", { class: "detail" }, q.detail));
    const textLabel = q.secret
      ? "Your secret answer (hidden; only the asking agent gets it)"
      : optionless
        ? "Your answer"
        : q.multiSelect
          ? "Other (added to your choices)"
          : "Other (instead of an option)";
    // A secret is typed masked, on one line, and never offered for autofill.
    const area = optionless && !q.secret;
    const textBox = h(
      area ? "textarea" : "input",
      {
        id: "answer-text",
        class: "text",
        "data-key": "text",
        "data-testid": "text",
        rows: area ? 3 : undefined,
        type: q.secret ? "password" : area ? undefined : "text",
        autocomplete: q.secret ? "off" : undefined,
        placeholder: q.secret
          ? "Only the asking agent gets this; Enter to confirm"
          : area
            ? "Type your answer; Enter to confirm, Shift+Enter for a new line"
            : "Your own answer",
        value: draft.custom,
        "data-autofocus": optionless ? "" : undefined,
        oninput: (event: Event) => {
          c.type((event.target as HTMLInputElement).value);
          this.render();
        },
        onkeydown: (event: KeyboardEvent) => {
          if (event.key !== "Enter" || event.shiftKey || composing(event)) return;
          event.preventDefault();
          this.act(() => c.confirm());
        },
      },
    );
    return h(
      "div",
      { class: "question" },
      q.header && h("p", { class: "chip" }, q.header),
      h("h2", { id: "question-text" }, q.question),
      detail,
      approval(c.batch, c.approvals),
      !optionless &&
        h(
          "div",
          {
            class: "options",
            role: "group",
            "aria-labelledby": "question-text",
            "data-testid": "options",
          },
          ...options,
        ),
      !(c.approving && !optionless) && h("label", { class: "text-label", for: "answer-text" }, textLabel),
      !(c.approving && !optionless) && textBox,
      c.hint && h("p", { class: "hint", role: "alert", "data-testid": "hint" }, c.hint),
      h(
        "div",
        { class: "actions" },
        h(
          "button",
          { type: "button", "data-key": "back", disabled: c.item === 0, onclick: () => this.act(() => c.goTo(c.item - 1)) },
          "Back",
        ),
        !c.approving &&
          h("button", { type: "button", "data-key": "skip", "data-testid": "skip", onclick: () => this.act(() => c.skip()) }, "Skip"),
        h(
          "button",
          { type: "button", "data-key": "next", "data-testid": "next", onclick: () => this.act(() => c.confirm()) },
          "Next",
        ),
        h(
          "button",
          {
            type: "button",
            class: "primary",
            "data-key": "submit",
            "data-testid": "submit",
            disabled: !c.complete(),
            onclick: () => void this.session.submit(c),
          },
          "Submit",
        ),
      ),
    );
  }

  private review(c: Composer): HTMLElement {
    const answers = c.answers();
    return h(
      "div",
      { class: "review", "data-testid": "review" },
      h("h2", {}, "Review your answers"),
      h(
        "dl",
        {},
        ...c.batch.questions.flatMap((q, i) => {
          const a = answers[i];
          const parts = [...a.selected.map((s) => recommended(s).text), ...(a.custom ? [`“${a.custom}”`] : [])];
          // A secret stays hidden on the review too.
          const shown = q.secret && parts.length > 0 ? ["(hidden)"] : parts;
          return [
            h("dt", {}, q.header ? `${q.header}: ${q.question}` : q.question),
            h(
              "dd",
              {},
              h("span", { class: "answer", "data-testid": "answer" }, shown.length > 0 ? shown.join(", ") : h("em", {}, "skipped")),
              h(
                "button",
                {
                  type: "button",
                  class: "quiet edit",
                  "data-key": `edit-${i}`,
                  "aria-label": `Change the answer to question ${i + 1}`,
                  onclick: () => this.act(() => c.goTo(i)),
                },
                "Change…",
              ),
            ),
          ];
        }),
      ),
      c.hint && h("p", { class: "hint", role: "alert", "data-testid": "hint" }, c.hint),
      h(
        "div",
        { class: "actions" },
        h(
          "button",
          {
            type: "button",
            class: "primary",
            "data-key": "submit",
            "data-testid": "submit",
            "data-autofocus": "",
            onclick: () => void this.session.submit(c),
          },
          "Submit answers",
        ),
      ),
      h("p", { class: "muted" }, "Enter submits."),
    );
  }

  private closing(c: Composer, reason: string): HTMLElement {
    const send = () => void this.session.cancel(c, c.phase.kind === "closing" ? c.phase.reason : "");
    return h(
      "div",
      { class: "closing", role: "group", "aria-labelledby": "closing-title" },
      h("h2", { id: "closing-title" }, "Cancel this batch?"),
      h(
        "p",
        { class: "muted", "data-testid": "closing-what" },
        "The agent is told you cancelled these questions, with your reason if you give one, and gets none of the answers.",
      ),
      h("label", { for: "cancel-reason", class: "text-label" }, "Reason (optional)"),
      h("input", {
        id: "cancel-reason",
        class: "text",
        type: "text",
        "data-key": "reason",
        "data-testid": "reason",
        "data-autofocus": "",
        // The server refuses a longer reason (it travels inside the agent's error).
        maxlength: "400",
        value: reason,
        oninput: (event: Event) => {
          if (c.phase.kind === "closing") c.phase.reason = (event.target as HTMLInputElement).value;
        },
        onkeydown: (event: KeyboardEvent) => {
          if (event.key !== "Enter" || composing(event)) return;
          event.preventDefault();
          send();
        },
      }),
      h(
        "div",
        { class: "actions" },
        h("button", { type: "button", "data-key": "keep", onclick: () => this.act(() => c.keepOpen()) }, "Keep answering"),
        h("button", { type: "button", class: "danger", "data-key": "cancel", "data-testid": "confirm-cancel", onclick: send }, "Cancel batch"),
      ),
    );
  }

  /** Runs a composer action, then redraws. */
  protected act(action: () => void): void {
    action();
    this.render();
  }

  /** Keys the controls do not handle themselves. */
  protected onKey(event: KeyboardEvent): void {
    const c = this.session.current;
    if (!c || composing(event) || event.defaultPrevented) return;
    const target = event.target as HTMLElement;
    const typing = target instanceof HTMLInputElement && target.type === "text";
    const inText = typing || target instanceof HTMLTextAreaElement;
    if (event.key === "Escape" && c.phase.kind === "closing") {
      event.preventDefault();
      this.act(() => c.keepOpen());
      return;
    }
    if (c.phase.kind === "closing" || inText) return;
    if (event.key === "ArrowDown" || event.key === "ArrowUp") {
      const options = [...this.root.querySelectorAll<HTMLElement>("[data-option]")];
      const at = options.indexOf(target);
      if (at < 0) return;
      event.preventDefault();
      const next = event.key === "ArrowDown" ? Math.min(options.length - 1, at + 1) : Math.max(0, at - 1);
      options[next].focus();
      return;
    }
    if (/^[1-9]$/.test(event.key) && c.phase.kind === "question" && !event.ctrlKey && !event.metaKey && !event.altKey) {
      const option = c.question.options[Number(event.key) - 1];
      if (!option) return;
      event.preventDefault();
      this.act(() => (c.question.multiSelect ? c.toggle(option.label) : c.choose(option.label)));
      return;
    }
    // Enter on a button is that button's click.
    if (event.key !== "Enter" || target instanceof HTMLButtonElement) return;
    event.preventDefault();
    if (c.phase.kind === "review" || (c.phase.kind === "question" && c.complete() && target === document.body)) {
      void this.session.submit(c);
    } else if (c.phase.kind === "question") {
      this.act(() => c.confirm());
    }
  }
}

/** Longest pretty-printed arguments shown whole; past it, their head and tail. */
const MAX_SHOWN_ARGUMENTS = 16 * 1024;

/** `text` whole when it fits, else its head and its tail around a mark of what is left out. */
function headAndTail(text: string, max: number): string {
  if (text.length <= max) return text;
  const half = Math.floor(max / 2);
  return `${text.slice(0, half)}\n… ${text.length - 2 * half} characters omitted …\n${text.slice(-half)}`;
}

/** A quorum batch this human approved: what it waits for. */
function approvedText(c: Composer): HTMLElement {
  const needed = c.quorum();
  const so = c.approvals ? ` ${c.approvals.count} of ${needed} so far: ${c.approvals.by.join(", ")}.` : "";
  return h(
    "div",
    { class: "approved", role: "status", "data-testid": "approved" },
    h("p", {}, "Your approval is recorded."),
    h(
      "p",
      { class: "muted" },
      `This batch needs ${needed} people who give the same answers before the agent goes on.${so} It closes when the others have answered.`,
    ),
  );
}

/** When the batch's default answers apply, in the reader's clock: "by 14:05 (in 25 min)". */
function deadline(batch: Requested): string {
  const seconds = batch.expiresAt ? Number(batch.expiresAt.seconds) : 0;
  if (seconds <= 0) return "in time";
  const at = new Date(seconds * 1000);
  const left = Math.max(0, Math.round((at.getTime() - Date.now()) / 60_000));
  const when = at.toLocaleString(undefined, { dateStyle: "medium", timeStyle: "short" });
  const within = left < 60 ? `${left} min` : `${Math.round(left / 60)} h`;
  return `by ${when} (in ${within})`;
}

/** `names` as a sentence lists them: "ana", "ana or bo", "ana, bo or cy". */
function listed(names: string[]): string {
  return names.length < 2 ? names.join("") : `${names.slice(0, -1).join(", ")} or ${names[names.length - 1]}`;
}

/**
 * What the batch's answer approves (docs/approvals.md): the action with its arguments
 * pretty-printed, who alone may answer it, the approvers a quorum needs, the answers
 * that apply when nobody answers in time, the channels it may be answered from.
 */
function approval(batch: Requested, approvals?: Approvals): HTMLElement | undefined {
  const terms: HTMLElement[] = [];
  if (batch.action) {
    let args = batch.action.argumentsJson;
    try {
      args = JSON.stringify(JSON.parse(args), null, 2);
    } catch {
      // Shown as sent.
    }
    terms.push(
      h("h3", {}, "Approves ", h("code", { "data-testid": "action-name" }, batch.action.name)),
      h("pre", { "data-testid": "action-arguments" }, headAndTail(args, MAX_SHOWN_ARGUMENTS)),
      h(
        "p",
        { class: "digest", "data-testid": "action-digest" },
        batch.askedBy ? `Asked by ${batch.askedBy}. ` : "",
        `Digest ${batch.actionDigest.slice(0, 16)}…: the signed receipt binds your answer to exactly this action, so nothing else can run on it.`,
      ),
    );
  }
  if (batch.approvers && (batch.approvers.subjects.length > 0 || batch.approvers.groups.length > 0)) {
    const who = [...batch.approvers.subjects, ...batch.approvers.groups.map((g) => `a member of ${g}`)];
    const cancel = batch.approvers.cancelToo ? " (and cancel)" : "";
    terms.push(h("p", { "data-testid": "approvers" }, `Only ${listed(who)} may answer this${cancel}.`));
  }
  if (batch.escalation.length > 0) {
    const asked = batch.requestedAt ? Number(batch.requestedAt.seconds) * 1000 : Date.now();
    const steps = batch.escalation.map((step) => {
      const at = new Date(asked + Number(step.afterMs)).toLocaleTimeString(undefined, { timeStyle: "short" });
      const named = [...(step.approvers?.subjects ?? []), ...(step.approvers?.groups ?? []).map((g) => `a member of ${g}`)];
      const who = named.length === 0 ? "" : step.replace ? `only ${listed(named)} may answer` : `${listed(named)} may answer too`;
      const sent = step.notifyChannels.length > 0 ? `${step.notifyChannels.length} more channel(s) notified` : "";
      return `at ${at}: ${[who, sent].filter((s) => s !== "").join(", ")}`;
    });
    terms.push(h("p", { "data-testid": "escalation" }, `Escalates ${steps.join("; ")}.`));
  }
  if (batch.quorum && batch.quorum.count > 1) {
    const so = approvals ? ` ${approvals.count} so far: ${approvals.by.join(", ")}.` : "";
    terms.push(h("p", { "data-testid": "quorum" }, `Needs ${batch.quorum.count} approvers who give the same answers.${so}`));
  }
  if (batch.defaultAnswers.length > 0) {
    const defaults = batch.defaultAnswers.map((a) => a.custom ?? a.selected.join(", ")).join("; ");
    terms.push(h("p", { "data-testid": "defaults" }, `If nobody answers ${deadline(batch)}: ${defaults}.`));
  }
  return terms.length > 0 ? h("div", { class: "approval", "data-testid": "approval" }, ...terms) : undefined;
}
