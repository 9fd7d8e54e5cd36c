package kubeletapi

import (
	"errors"
	"fmt"
	"net/http"
	"net/url"
	"strconv"
	"time"

	"github.com/speclet/speclet/engine/containerlogs"
)

// parseLogOptions reads follow, previous, timestamps, tailLines, limitBytes,
// sinceSeconds and sinceTime (RFC 3339); now resolves sinceSeconds. Each
// error names its parameter.
func parseLogOptions(q url.Values, now time.Time) (containerlogs.ReadOptions, error) {
	var o containerlogs.ReadOptions
	var err error
	boolean := func(name string) bool {
		v := q.Get(name)
		if v == "" || err != nil {
			return false
		}
		b, perr := strconv.ParseBool(v)
		if perr != nil {
			err = fmt.Errorf("%s: %q is not a boolean", name, v)
		}
		return b
	}
	number := func(name string, min int64) *int64 {
		v := q.Get(name)
		if v == "" || err != nil {
			return nil
		}
		n, perr := strconv.ParseInt(v, 10, 64)
		if perr != nil || n < min {
			err = fmt.Errorf("%s: %q: want an integer >= %d", name, v, min)
			return nil
		}
		return &n
	}
	o.Follow = boolean("follow")
	o.Previous = boolean("previous")
	o.Timestamps = boolean("timestamps")
	o.TailLines = number("tailLines", 0)
	o.LimitBytes = number("limitBytes", 1)
	if s := number("sinceSeconds", 1); s != nil {
		o.Since = now.Add(-time.Duration(*s) * time.Second)
	}
	if v := q.Get("sinceTime"); v != "" && err == nil {
		if q.Get("sinceSeconds") != "" {
			return o, errors.New("sinceSeconds and sinceTime: give at most one")
		}
		t, perr := time.Parse(time.RFC3339, v)
		if perr != nil {
			return o, fmt.Errorf("sinceTime: %q is not an RFC 3339 time", v)
		}
		o.Since = t
	}
	return o, err
}

// logHandlerError writes a log error as kubelet does: 400 for bad
// parameters, 404 for an unknown pod or container.
func httpError(w http.ResponseWriter, code int, format string, args ...any) {
	http.Error(w, fmt.Sprintf(format, args...), code)
}
