package apierr

import (
	"context"
	"fmt"
	"log/slog"
	"sync"
	"time"
)

// ClientErrorEvery is how often ClientErrors logs one failure again while
// its kind stays the same.
const ClientErrorEvery = 5 * time.Minute

// ClientErrors returns a handler for client-go's errors that cannot be
// returned (k8s.io/apimachinery/pkg/util/runtime.ErrorHandlers: a
// reflector's failed list or watch, retried by itself with backoff): each
// message (per reflector) is logged to log with Describe's cause when it
// first fails, when the kind of its failure changes, and at most every
// ClientErrorEvery otherwise, with the count of failures not logged.
func ClientErrors(log *slog.Logger) func(ctx context.Context, err error, msg string, keysAndValues ...any) {
	type state struct {
		kind   string
		logged time.Time
		held   int
	}
	var mu sync.Mutex
	seen := map[string]*state{}
	return func(_ context.Context, err error, msg string, keysAndValues ...any) {
		key := msg
		for i := 0; i+1 < len(keysAndValues); i += 2 {
			if keysAndValues[i] == "reflector" {
				key += fmt.Sprint(" ", keysAndValues[i+1])
			}
		}
		kind := "nil"
		if err != nil {
			kind = Kind(err)
		}
		now := time.Now()
		mu.Lock()
		s := seen[key]
		if s == nil {
			s = &state{}
			seen[key] = s
		}
		if s.kind == kind && now.Sub(s.logged) < ClientErrorEvery {
			s.held++
			mu.Unlock()
			return
		}
		held := s.held
		s.kind, s.logged, s.held = kind, now, 0
		mu.Unlock()
		attrs := append([]any{}, keysAndValues...)
		if err != nil {
			attrs = append(attrs, "err", Describe(err))
		}
		if held > 0 {
			attrs = append(attrs, "failures-not-logged", held)
		}
		log.Error(msg+" (retrying with backoff; logged again when the cause changes or every 5m)", attrs...)
	}
}
