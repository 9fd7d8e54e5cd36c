package fsm

import "context"

// actionTag names the action a context runs under. The generated dispatch
// (Run<Machine>Action) tags its context with a pointer into a static table
// of tags, so tagging costs one context node per action run.
type actionTag struct {
	machine, action string
}

type actionKey struct{}

// WithAction returns ctx tagged with the action (spec names of the machine
// and of the action) that runs under it. Run<Machine>Action does this for the
// action it dispatches; an action run inside another (the spec's `calls`)
// replaces the tag for its own calls.
func WithAction(ctx context.Context, machine, action string) context.Context {
	return withActionTag(ctx, &actionTag{machine: machine, action: action})
}

func withActionTag(ctx context.Context, t *actionTag) context.Context {
	return context.WithValue(ctx, actionKey{}, t)
}

// ActionFrom returns the innermost action ctx was tagged with by WithAction
// or a generated Run<Machine>Action; ok is false outside any action.
func ActionFrom(ctx context.Context) (machine, action string, ok bool) {
	if ctx == nil {
		return "", "", false
	}
	t, _ := ctx.Value(actionKey{}).(*actionTag)
	if t == nil {
		return "", "", false
	}
	return t.machine, t.action, true
}
