// One batch in the composer, apart from drawing and I/O: the drafts of its questions,
// the question shown, and what the human is doing. The same rules as the terminal
// overlay (service/src/cli/overlay/state.rs): a single choice advances, a multiple
// one toggles, "Other" text replaces a single choice and adds to a multiple one,
// Skip skips only the current question, and the batch is sent only when every
// question is answered or skipped. tests/composer/vectors.json holds these rules as
// test vectors that both this composer and the overlay run.

import { create } from "@bufbuild/protobuf";
import {
  type Question,
  type QuestionAnswer,
  QuestionAnswerSchema,
  type Requested,
} from "@askgate/client/proto";

export type Status = "open" | "answered" | "skipped";

/** One question's draft: kept when the human moves to another question and back. */
export interface Draft {
  /** Chosen labels in the order chosen, each at most once. */
  selected: string[];
  /** The free-text ("Other") answer as typed; confirmed once the status says so. */
  custom: string;
  status: Status;
}

/** What the composer shows. */
export type Phase =
  /** A question: choosing or typing. */
  | { kind: "question" }
  /** Every question is answered or skipped: Enter submits. */
  | { kind: "review" }
  /** Asking for the optional reason before cancelling the whole batch. */
  | { kind: "closing"; reason: string; back: "question" | "review" }
  /** Sent: waiting for the server's `resolved` event for this batch. */
  | { kind: "sent"; what: "answer" | "cancel" }
  /** A quorum batch this human approved: waiting for its other approvers. */
  | { kind: "approved" };

/** The approvals a quorum batch has so far, from its `approval` events. */
export interface Approvals {
  count: number;
  needed: number;
  /** Who approved, in order. */
  by: string[];
}

/** The suffix that marks an option the asker recommends: a badge, never preselected. */
export const RECOMMENDED = "(Recommended)";

/** A label without its "(Recommended)" suffix, and whether it had one. */
export function recommended(label: string): { text: string; recommended: boolean } {
  const trimmed = label.trimEnd();
  if (trimmed.endsWith(RECOMMENDED)) {
    return { text: trimmed.slice(0, -RECOMMENDED.length).trimEnd(), recommended: true };
  }
  return { text: label, recommended: false };
}

/** The approve option's label when the question asks to review a plan. */
export function planApprove(question: Question): string | undefined {
  const kind = question.intent?.kind;
  return kind?.case === "planReview" ? kind.value.approve : undefined;
}

/** What the human is told on the question that approves the batch's action. */
export const APPROVING_HINT = "This question approves the action: choose one of its options.";

export class Composer {
  readonly batch: Requested;
  /** The question shown. */
  item = 0;
  /** A quorum batch's approvals so far. */
  approvals: Approvals | undefined;
  readonly drafts: Draft[];
  phase: Phase = { kind: "question" };
  /** A one-line hint after an action that could not do anything. */
  hint = "";

  constructor(batch: Requested) {
    this.batch = batch;
    this.drafts = batch.questions.map(() => ({ selected: [], custom: "", status: "open" }));
  }

  get question(): Question {
    return this.batch.questions[this.item];
  }

  get draft(): Draft {
    return this.drafts[this.item];
  }

  /**
   * Whether the question shown approves the batch's action: its options alone answer it
   * (no own words, no skip), so that an approval is a choice the human was shown.
   */
  get approving(): boolean {
    const id = this.question.id;
    return this.batch.action?.approvingAnswers.some((a) => a.id === id) ?? false;
  }

  /** Every question answered or skipped. */
  complete(): boolean {
    return this.drafts.every((d) => d.status !== "open");
  }

  /** Shows question `item` with its draft as it was left. */
  goTo(item: number): void {
    if (this.phase.kind === "sent") return;
    this.hint = "";
    this.item = Math.max(0, Math.min(item, this.drafts.length - 1));
    this.phase = { kind: "question" };
  }

  /** The review, when every question is done. */
  review(): void {
    if (this.complete() && this.phase.kind !== "sent") this.phase = { kind: "review" };
  }

  /** Single-select: choose `label` and go on. */
  choose(label: string): void {
    const draft = this.draft;
    draft.selected = [label];
    draft.custom = "";
    draft.status = "answered";
    this.advance();
  }

  /** Multi-select: toggle `label`; the question counts as answered while anything is chosen. */
  toggle(label: string): void {
    const draft = this.draft;
    const at = draft.selected.indexOf(label);
    if (at >= 0) draft.selected.splice(at, 1);
    else draft.selected.push(label);
    this.hint = "";
    this.settleMulti();
  }

  /** The "Other" text as typed (not yet confirmed on a single-select). */
  type(text: string): void {
    if (this.approving && this.question.options.length > 0) return;
    this.draft.custom = text;
    if (this.question.multiSelect) this.settleMulti();
  }

  /**
   * Enter in the text box, or "Next": confirms the current question and goes on. An
   * empty text takes the free-text answer back; a choice made before stays.
   */
  confirm(): void {
    const draft = this.draft;
    const text = draft.custom.trim();
    const multi = this.question.multiSelect;
    if (text !== "") {
      draft.custom = text;
      // A single-select's free text replaces the choice.
      if (!multi) draft.selected = [];
      draft.status = "answered";
      this.advance();
      return;
    }
    draft.custom = "";
    if (draft.selected.length > 0) {
      draft.status = "answered";
      this.advance();
      return;
    }
    draft.status = draft.status === "skipped" ? "skipped" : "open";
    this.hint = this.approving
      ? APPROVING_HINT
      : this.question.options.length === 0
        ? "Type an answer, or Skip this question."
        : multi
          ? "Choose at least one option, write your own, or Skip this question."
          : "Choose an option, write your own, or Skip this question.";
  }

  /** Skips only the current question; the drafts of the others stay. */
  skip(): void {
    if (this.approving) {
      this.hint = APPROVING_HINT;
      return;
    }
    this.draft.status = "skipped";
    this.advance();
  }

  /** The close control: ask for the optional reason. */
  close(): void {
    const kind = this.phase.kind;
    if (kind === "question" || kind === "review") this.phase = { kind: "closing", reason: "", back: kind };
  }

  /** Back from closing to where the human was. */
  keepOpen(): void {
    if (this.phase.kind === "closing") this.phase = { kind: this.phase.back };
  }

  /** The batch went out: the composer waits for the server's `resolved` event. */
  sent(what: "answer" | "cancel"): void {
    this.phase = { kind: "sent", what };
  }

  /** The human's approval of a quorum batch is recorded; it waits for the others. */
  approved(): void {
    this.phase = { kind: "approved" };
  }

  /** How many approvers a quorum batch needs (0: not a quorum batch). */
  quorum(): number {
    const needed = this.batch.quorum?.count ?? 0;
    return needed > 1 ? needed : 0;
  }

  /** The send failed: back to where the human was, drafts intact. */
  unsent(why: string): void {
    this.phase = this.complete() ? { kind: "review" } : { kind: "question" };
    this.hint = why;
  }

  /** The batch as `Answer` takes it: one entry per question, in question order. */
  answers(): QuestionAnswer[] {
    return this.batch.questions.map((question, i) => {
      const draft = this.drafts[i];
      if (draft.status !== "answered") return create(QuestionAnswerSchema, { id: question.id });
      const custom = draft.custom.trim();
      return create(QuestionAnswerSchema, {
        id: question.id,
        // A single-select's free text replaces the choice (docs/protocol.md, Semantics 4).
        selected: !question.multiSelect && custom !== "" ? [] : [...draft.selected],
        custom: custom === "" ? undefined : custom,
      });
    });
  }

  private settleMulti(): void {
    const draft = this.draft;
    const chosen = draft.selected.length > 0 || draft.custom.trim() !== "";
    draft.status = chosen ? "answered" : draft.status === "skipped" ? "skipped" : "open";
  }

  /**
   * After a question is answered or skipped: the review once every question is done,
   * else the next question, or after the last one the first still open.
   */
  private advance(): void {
    this.hint = "";
    if (this.complete()) {
      this.phase = { kind: "review" };
    } else if (this.item + 1 < this.drafts.length) {
      this.goTo(this.item + 1);
    } else {
      this.goTo(Math.max(0, this.drafts.findIndex((d) => d.status === "open")));
    }
  }
}
