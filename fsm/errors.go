package fsm

import (
	"errors"
	"fmt"
)

// ErrNoTransition is wrapped by the error Fire returns when the current state
// has no transition on the event whose guard holds. The machine is unchanged.
var ErrNoTransition = errors.New("no transition")

var errChoiceLoop = errors.New("choices loop without reaching a stable state")

// NoTransitionError is the error Fire returns when no transition applies; it
// wraps ErrNoTransition.
type NoTransitionError struct {
	Machine, State, Event string
}

func (e *NoTransitionError) Error() string {
	return fmt.Sprintf("%s machine: event %q in state %q: %v", e.Machine, e.Event, e.State, ErrNoTransition)
}

// Unwrap returns ErrNoTransition.
func (e *NoTransitionError) Unwrap() error { return ErrNoTransition }
