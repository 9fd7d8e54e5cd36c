package volume

import (
	"context"
	"fmt"
	"sync"
	"time"

	authv1 "k8s.io/api/authentication/v1"
	v1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/types"
)

// DefaultTokenExpiration is a projected serviceAccountToken's lifetime when
// the pod gives none (the API's default, 1 h).
const DefaultTokenExpiration = 3600

// tokens caches the service account tokens of pods, as kubelet's token
// manager: a token is requested again once 80% of its lifetime has
// passed, or when it is older than 24 h.
type tokens struct {
	mu    sync.Mutex
	cache map[tokenKey]*authv1.TokenRequest
	now   func() time.Time
}

type tokenKey struct {
	uid                types.UID
	namespace, account string
	audience           string
	expiration         int64
}

// needsRefresh: kubelet's requiresRefresh.
func needsRefresh(tr *authv1.TokenRequest, now time.Time) bool {
	if tr.Spec.ExpirationSeconds == nil {
		return true
	}
	exp := tr.Status.ExpirationTimestamp.Time
	lifetime := time.Duration(*tr.Spec.ExpirationSeconds) * time.Second
	issued := exp.Add(-lifetime)
	if now.After(issued.Add(lifetime * 8 / 10)) {
		return true
	}
	return now.After(issued.Add(24 * time.Hour))
}

func (t *tokens) get(ctx context.Context, api API, pod *v1.Pod, p *v1.ServiceAccountTokenProjection) (string, error) {
	if api == nil {
		return "", fmt.Errorf("serviceAccountToken: %w", ErrNoAPI)
	}
	sa := pod.Spec.ServiceAccountName
	if sa == "" {
		sa = "default"
	}
	exp := int64(DefaultTokenExpiration)
	if p.ExpirationSeconds != nil {
		exp = *p.ExpirationSeconds
	}
	key := tokenKey{pod.UID, pod.Namespace, sa, p.Audience, exp}
	t.mu.Lock()
	defer t.mu.Unlock()
	if tr := t.cache[key]; tr != nil && !needsRefresh(tr, t.now()) {
		return tr.Status.Token, nil
	}
	req := &authv1.TokenRequest{Spec: authv1.TokenRequestSpec{
		ExpirationSeconds: &exp,
		BoundObjectRef:    &authv1.BoundObjectReference{APIVersion: "v1", Kind: "Pod", Name: pod.Name, UID: pod.UID},
	}}
	if p.Audience != "" {
		req.Spec.Audiences = []string{p.Audience}
	}
	tr, err := api.CreateToken(ctx, pod.Namespace, sa, req)
	if err != nil {
		return "", fmt.Errorf("request token for service account %s/%s: %w", pod.Namespace, sa, err)
	}
	if tr.Spec.ExpirationSeconds == nil {
		tr.Spec.ExpirationSeconds = &exp
	}
	if t.cache == nil {
		t.cache = map[tokenKey]*authv1.TokenRequest{}
	}
	t.cache[key] = tr
	return tr.Status.Token, nil
}

// forget drops the tokens of pod uid.
func (t *tokens) forget(uid types.UID) {
	t.mu.Lock()
	defer t.mu.Unlock()
	for k := range t.cache {
		if k.uid == uid {
			delete(t.cache, k)
		}
	}
}
