package tools

import (
	"context"
	"encoding/json"
	"fmt"
	"strings"
)

// AskUser is the ask_user tool: a question to the person (interaction:request); the run waits for
// the answer.
type AskUser struct{}

type askUserInput struct {
	Prompt    string   `json:"prompt"`
	Options   []string `json:"options"`
	Multiple  bool     `json:"multiple"`
	AllowText *bool    `json:"allow_text"`
}

// Spec implements Tool.
func (AskUser) Spec() Spec {
	return Spec{Name: "ask_user", Description: "Ask the user a question and wait for the answer. Offer options when the answer is a choice " +
		"(multiple: several may be chosen); allow_text (default true when there are no options) lets the user type an answer. " +
		"The user may dismiss the question: then continue with your best judgement.",
		InputSchema: json.RawMessage(`{"type":"object","properties":{` +
			`"prompt":{"type":"string","minLength":1,"description":"the question"},` +
			`"options":{"type":"array","items":{"type":"string"},"description":"choices to offer"},` +
			`"multiple":{"type":"boolean","description":"several options may be chosen"},` +
			`"allow_text":{"type":"boolean","description":"a free-text answer is allowed"}},"required":["prompt"]}`)}
}

// Kind implements Tool.
func (AskUser) Kind() Kind { return KindInteract }

func (AskUser) parse(input json.RawMessage) (Question, error) {
	var in askUserInput
	if err := decode("ask_user", input, &in); err != nil {
		return Question{}, err
	}
	if strings.TrimSpace(in.Prompt) == "" {
		return Question{}, failf("ask_user: prompt is required.")
	}
	q := Question{Prompt: in.Prompt, Options: in.Options, Multiple: in.Multiple, AllowText: len(in.Options) == 0}
	if in.AllowText != nil {
		q.AllowText = *in.AllowText
	}
	if len(q.Options) == 0 && !q.AllowText {
		return Question{}, failf("ask_user: with no options, allow_text must be true (the user needs a way to answer).")
	}
	return q, nil
}

// Check implements Tool.
func (t AskUser) Check(_ context.Context, _ *Env, input json.RawMessage) (*Call, error) {
	q, err := t.parse(input)
	if err != nil {
		return nil, err
	}
	return &Call{Summary: "ask_user " + q.Prompt}, nil
}

// Run implements Tool.
func (t AskUser) Run(ctx context.Context, env *Env, input json.RawMessage) (*Result, error) {
	q, err := t.parse(input)
	if err != nil {
		return failure(err), nil
	}
	if env.Ask == nil {
		return failure(failf("ask_user: nobody can be asked in this session.")), nil
	}
	a, err := env.Ask(ctx, q)
	if err != nil {
		if ctx.Err() != nil {
			return &Result{Content: "The question was withdrawn: the run was cancelled.", IsError: true}, ctx.Err()
		}
		return failure(err), nil
	}
	return &Result{Content: AnswerText(a)}, nil
}

// AnswerText is how an answer reads to the model.
func AnswerText(a *Answer) string {
	if a == nil {
		return "The user dismissed the question without answering. Continue with your best judgement."
	}
	var parts []string
	if len(a.Choices) > 0 {
		parts = append(parts, "chose "+quoteJoin(a.Choices))
	}
	if a.Text != "" {
		parts = append(parts, fmt.Sprintf("wrote %q", a.Text))
	}
	if len(parts) == 0 {
		return "The user answered without choosing anything."
	}
	return "The user " + strings.Join(parts, " and ") + "."
}

func quoteJoin(xs []string) string {
	q := make([]string, len(xs))
	for i, x := range xs {
		q[i] = fmt.Sprintf("%q", x)
	}
	return strings.Join(q, ", ")
}

// UpdatePlan is the update_plan tool: replace the session's plan (plans:snapshot).
type UpdatePlan struct{}

type updatePlanInput struct {
	Explanation string     `json:"explanation"`
	Steps       []PlanStep `json:"steps"`
}

// PlanStatuses are the statuses a plan step may have.
var PlanStatuses = []string{"pending", "in_progress", "done"}

// Spec implements Tool.
func (UpdatePlan) Spec() Spec {
	return Spec{Name: "update_plan", Description: "Replace the session's plan: the steps of the work with their status " +
		"(pending, in_progress, done). Send the whole list each time; keep at most one step in_progress.",
		InputSchema: json.RawMessage(`{"type":"object","properties":{` +
			`"explanation":{"type":"string","description":"why the plan changed (optional)"},` +
			`"steps":{"type":"array","items":{"type":"object","properties":{` +
			`"title":{"type":"string","minLength":1},"status":{"type":"string","enum":["pending","in_progress","done"]}},` +
			`"required":["title","status"]}}},"required":["steps"]}`)}
}

// Kind implements Tool.
func (UpdatePlan) Kind() Kind { return KindInteract }

func (UpdatePlan) parse(input json.RawMessage) (updatePlanInput, error) {
	var in updatePlanInput
	if err := decode("update_plan", input, &in); err != nil {
		return in, err
	}
	if len(in.Steps) > 100 {
		return in, failf("update_plan: at most 100 steps.")
	}
	for i, s := range in.Steps {
		if strings.TrimSpace(s.Title) == "" {
			return in, failf("update_plan: step %d has no title.", i+1)
		}
		if !setOf(PlanStatuses...)[s.Status] {
			return in, failf("update_plan: step %d has status %q; use pending, in_progress or done.", i+1, s.Status)
		}
	}
	return in, nil
}

// Check implements Tool.
func (t UpdatePlan) Check(_ context.Context, _ *Env, input json.RawMessage) (*Call, error) {
	in, err := t.parse(input)
	if err != nil {
		return nil, err
	}
	return &Call{Summary: fmt.Sprintf("update_plan (%d steps)", len(in.Steps))}, nil
}

// Run implements Tool.
func (t UpdatePlan) Run(ctx context.Context, env *Env, input json.RawMessage) (*Result, error) {
	in, err := t.parse(input)
	if err != nil {
		return failure(err), nil
	}
	if env.SetPlan == nil {
		return failure(failf("update_plan: this session keeps no plan.")), nil
	}
	if err := env.SetPlan(ctx, in.Explanation, in.Steps); err != nil {
		return failure(err), nil
	}
	done := 0
	for _, s := range in.Steps {
		if s.Status == "done" {
			done++
		}
	}
	return &Result{Content: fmt.Sprintf("Plan updated: %d steps, %d done.", len(in.Steps), done)}, nil
}
