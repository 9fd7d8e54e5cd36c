package config

import (
	"bytes"
	"context"
	"fmt"
	"io"
	"log/slog"
	"net/http"
	"time"

	v1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"sigs.k8s.io/yaml"
)

// DefaultURLPeriod is how often a manifest URL is fetched, as in kubelet.
const DefaultURLPeriod = 20 * time.Second

// URLSource is a manifest URL (kubelet's --manifest-url) serving a v1 Pod, a
// v1 PodList or a v1 List of pods, in YAML or JSON.
//
// A fetch that fails (network error, HTTP status other than 200, a body that
// does not decode) keeps the previous snapshot. An empty body declares no
// pods, as in kubelet. An item that is invalid is logged with its index and
// field and skipped, keeping the last valid pod of the same name if there was
// one; the other items are used.
type URLSource struct {
	URL      string
	NodeName string
	// Period between fetches; 0 means DefaultURLPeriod.
	Period time.Duration
	// Client defaults to an http.Client with a 10 s timeout.
	Client *http.Client
}

// urlFetcher fetches a URL source and remembers the last body and the last
// valid pod of each manifest name.
type urlFetcher struct {
	src  URLSource
	data []byte
	seen bool
	good map[string]*v1.Pod // by manifest metadata.name
	last []*v1.Pod
}

// maxURLBytes bounds the body of --manifest-url (a list of pods, each
// item also held to MaxManifestBytes once decoded).
const maxURLBytes = 64 << 20

func newURLFetcher(src URLSource) *urlFetcher {
	if src.Client == nil {
		src.Client = &http.Client{Timeout: 10 * time.Second}
	}
	return &urlFetcher{src: src, good: map[string]*v1.Pod{}}
}

// fetch returns the snapshot, whether it changed, the problems of single
// items, and err when the fetch as a whole failed (the snapshot is then the
// previous one).
func (f *urlFetcher) fetch(ctx context.Context) (pods []*v1.Pod, changed bool, problems []error, err error) {
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, f.src.URL, nil)
	if err != nil {
		return f.last, false, nil, fmt.Errorf("manifest url %s: %w", f.src.URL, err)
	}
	resp, err := f.src.Client.Do(req)
	if err != nil {
		return f.last, false, nil, fmt.Errorf("fetch manifest url: %w", err)
	}
	defer resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		return f.last, false, nil, fmt.Errorf("fetch manifest url %s: HTTP %s", f.src.URL, resp.Status)
	}
	data, err := io.ReadAll(io.LimitReader(resp.Body, maxURLBytes+1))
	if err != nil {
		return f.last, false, nil, fmt.Errorf("read manifest url %s: %w", f.src.URL, err)
	}
	if len(data) > maxURLBytes {
		return f.last, false, nil, fmt.Errorf("read manifest url %s: more than %d bytes (64 MiB); not used", f.src.URL, maxURLBytes)
	}
	if f.seen && bytes.Equal(data, f.data) {
		return f.last, false, nil, nil
	}
	if len(bytes.TrimSpace(data)) == 0 {
		f.data, f.seen, f.last, f.good = data, true, nil, map[string]*v1.Pod{}
		return nil, true, nil, nil
	}
	items, err := f.items(data)
	if err != nil {
		return f.last, false, nil, err
	}
	good := map[string]*v1.Pod{}
	byName := map[string]string{}
	byUID := map[types.UID]string{}
	for i, raw := range items {
		origin := fmt.Sprintf("%s item %d", f.src.URL, i)
		if len(items) == 1 {
			origin = f.src.URL
		}
		pod, err := decodePod(raw, origin)
		var sp *v1.Pod
		if err == nil {
			sp, err = staticPod(pod, SourceHTTP, origin, f.src.URL, f.src.NodeName)
		}
		if err != nil {
			problems = append(problems, err)
			if pod != nil && f.good[pod.Name] != nil {
				sp = f.good[pod.Name]
				problems = append(problems, fmt.Errorf("manifest %s: keeping the last valid pod %s/%s (uid %s)", origin, sp.Namespace, sp.Name, sp.UID))
			} else {
				continue
			}
		}
		full := sp.Namespace + "/" + sp.Name
		if other, dup := byName[full]; dup {
			problems = append(problems, &ManifestError{Origin: origin, Field: "metadata.name", Msg: fmt.Sprintf("pod %s is already declared by %s; skipped", full, other)})
			continue
		}
		if other, dup := byUID[sp.UID]; dup {
			problems = append(problems, &ManifestError{Origin: origin, Field: "metadata.uid", Msg: fmt.Sprintf("uid %s is already used by %s; skipped", sp.UID, other)})
			continue
		}
		byName[full], byUID[sp.UID] = origin, origin
		good[pod.Name] = sp
		pods = append(pods, sp)
	}
	f.data, f.seen, f.last, f.good = data, true, pods, good
	return pods, true, problems, nil
}

// items splits a body into the raw manifests of its pods.
func (f *urlFetcher) items(data []byte) ([][]byte, error) {
	var tm metav1.TypeMeta
	if err := yaml.Unmarshal(data, &tm); err != nil {
		return nil, &ManifestError{Origin: f.src.URL, Msg: "decode: " + cleanDecodeError(err)}
	}
	if err := checkKind(tm, f.src.URL, "Pod", "PodList", "List"); err != nil {
		return nil, err
	}
	if tm.Kind == "Pod" {
		return [][]byte{data}, nil
	}
	// Decode the list loosely, then each item strictly as a pod.
	var list struct {
		Items []map[string]any `json:"items"`
	}
	if err := yaml.Unmarshal(data, &list); err != nil {
		return nil, &ManifestError{Origin: f.src.URL, Field: "items", Msg: "decode: " + cleanDecodeError(err)}
	}
	out := make([][]byte, len(list.Items))
	for i, it := range list.Items {
		if tm.Kind == "PodList" {
			if _, ok := it["kind"]; !ok {
				it["kind"], it["apiVersion"] = "Pod", "v1"
			}
		}
		b, err := yaml.Marshal(it)
		if err != nil {
			return nil, &ManifestError{Origin: f.src.URL, Field: fmt.Sprintf("items[%d]", i), Msg: err.Error()}
		}
		out[i] = b
	}
	return out, nil
}

// WatchURL feeds the Merger with the snapshots of src until ctx ends: at once
// and then every Period. A failed fetch is logged and changes nothing.
func WatchURL(ctx context.Context, src URLSource, m *Merger, log *slog.Logger) error {
	if log == nil {
		log = slog.Default()
	}
	period := src.Period
	if period <= 0 {
		period = DefaultURLPeriod
	}
	f := newURLFetcher(src)
	tick := time.NewTicker(period)
	defer tick.Stop()
	lastErr := ""
	for {
		pods, changed, problems, err := f.fetch(ctx)
		switch {
		case err != nil && ctx.Err() == nil:
			// Once per distinct error, not once per fetch.
			if err.Error() != lastErr {
				log.Error("manifest url: keeping the previous pods", "source", SourceHTTP, "url", src.URL, "err", err)
				lastErr = err.Error()
			}
		case err == nil && lastErr != "":
			log.Info("manifest url answers again", "source", SourceHTTP, "url", src.URL)
			lastErr = ""
		}
		for _, p := range problems {
			log.Error("manifest skipped", "source", SourceHTTP, "err", p)
		}
		if changed {
			if err := m.Set(ctx, SourceHTTP, pods); err != nil {
				return err
			}
		}
		select {
		case <-ctx.Done():
			return ctx.Err()
		case <-tick.C:
		}
	}
}
