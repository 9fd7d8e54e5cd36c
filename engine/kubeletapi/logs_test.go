package kubeletapi

import (
	"net/url"
	"strings"
	"testing"
	"time"
)

func TestParseLogOptions(t *testing.T) {
	now := time.Date(2026, 11, 23, 10, 0, 0, 0, time.UTC)
	o, err := parseLogOptions(url.Values{"follow": {"true"}, "tailLines": {"5"}, "limitBytes": {"10"}, "sinceSeconds": {"60"},
		"timestamps": {"1"}, "previous": {"false"}}, now)
	if err != nil {
		t.Fatal(err)
	}
	if !o.Follow || !o.Timestamps || o.Previous || *o.TailLines != 5 || *o.LimitBytes != 10 || !o.Since.Equal(now.Add(-time.Minute)) {
		t.Errorf("parsed %+v", o)
	}
	o, err = parseLogOptions(url.Values{"sinceTime": {"2026-11-23T09:00:00Z"}}, now)
	if err != nil || !o.Since.Equal(now.Add(-time.Hour)) {
		t.Errorf("sinceTime: %+v, %v", o, err)
	}
	for q, want := range map[string]string{
		"tailLines=x":                "tailLines",
		"tailLines=-1":               "tailLines",
		"limitBytes=0":               "limitBytes",
		"follow=maybe":               "follow",
		"sinceTime=yesterday":        "sinceTime",
		"sinceSeconds=1&sinceTime=x": "at most one",
	} {
		v, _ := url.ParseQuery(q)
		if _, err := parseLogOptions(v, now); err == nil || !strings.Contains(err.Error(), want) {
			t.Errorf("%s: error %v, want one naming %q", q, err, want)
		}
	}
}
