package fsm

import (
	"context"
	"slices"
)

// actionTag names the action a context runs under: a machine's action, or a
// handler of a caller outside the machines (machine is then the caller's
// name). The generated dispatch (Run<Machine>Action, <Machine>Action.Tag,
// Handler.Tag) tags its context with a pointer into a static table of tags,
// so tagging costs one context node per action run.
type actionTag struct {
	machine, action string
	// uncancellable lists the CRI methods the spec says a kill does not
	// cancel (the action's `uncancellable`).
	uncancellable []string
}

type actionKey struct{}

// WithAction returns ctx tagged with the action (spec names of the machine
// and of the action) that runs under it. Run<Machine>Action does this for the
// action it dispatches; an action run inside another (the spec's `calls`)
// replaces the tag for its own calls. A tag made here carries the names
// only: Uncancellable is false under it for every method (tests, tools);
// the engine tags with the generated <Machine>Action.Tag.
func WithAction(ctx context.Context, machine, action string) context.Context {
	return withActionTag(ctx, &actionTag{machine: machine, action: action})
}

func withActionTag(ctx context.Context, t *actionTag) context.Context {
	return context.WithValue(ctx, actionKey{}, t)
}

func tagFrom(ctx context.Context) *actionTag {
	if ctx == nil {
		return nil
	}
	t, _ := ctx.Value(actionKey{}).(*actionTag)
	return t
}

// ActionFrom returns the innermost action ctx was tagged with by WithAction
// or the generated dispatch; ok is false outside any action. Under a
// handler's tag (Handler.Tag) machine is the handler's caller and action
// the handler.
func ActionFrom(ctx context.Context) (machine, action string, ok bool) {
	t := tagFrom(ctx)
	if t == nil {
		return "", "", false
	}
	return t.machine, t.action, true
}

// Uncancellable reports whether the innermost action ctx was tagged with
// declares the CRI method uncancellable (its spec's `uncancellable`): a
// kill that cancels the action must let that call run to its end. It is
// false outside any action and under a tag of WithAction.
func Uncancellable(ctx context.Context, method string) bool {
	t := tagFrom(ctx)
	return t != nil && slices.Contains(t.uncancellable, method)
}
