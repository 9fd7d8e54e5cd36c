package podspec

import (
	"encoding/base64"
	"encoding/json"
	"fmt"
	"net"
	"net/url"
	"path/filepath"
	"sort"
	"strings"

	"github.com/distribution/reference"
	v1 "k8s.io/api/core/v1"
	runtimeapi "k8s.io/cri-api/pkg/apis/runtime/v1"
)

// The registry an image without a host comes from, and the key that
// credentials for it are stored under in a .dockercfg.
const (
	defaultRegistryHost = "index.docker.io"
)

// PullCredentials returns the credentials of the pod's imagePullSecrets
// that apply to image, most specific first, as kubelet's keyring does: a
// secret of type kubernetes.io/dockerconfigjson (.dockerconfigjson) or
// kubernetes.io/dockercfg (.dockercfg) holds registry keys (a host, with an
// optional port, path and "*" labels) and their credentials; a key matches
// when its host matches the image's registry label by label, its port is
// the image's, and its path is a prefix of the image's repository path.
// Images of the default registry fall back to credentials stored for
// index.docker.io. The caller tries each in turn, and pulls without
// credentials when there are none.
//
// A secret of another type, or without its key, contributes nothing; a
// secret whose config does not parse is an error naming it.
func PullCredentials(image string, secrets []*v1.Secret) ([]*runtimeapi.AuthConfig, error) {
	creds := map[string][]*runtimeapi.AuthConfig{}
	for _, s := range secrets {
		entries, err := dockerEntries(s)
		if err != nil {
			return nil, fmt.Errorf("image pull secret %q: %w", s.Name, err)
		}
		for loc, e := range entries {
			key, ok := registryKey(loc)
			if !ok {
				continue // kubelet ignores an entry whose location is no URL
			}
			creds[key] = append(creds[key], &runtimeapi.AuthConfig{Username: e.Username, Password: e.Password})
		}
	}
	if len(creds) == 0 {
		return nil, nil
	}
	repo := image
	if named, err := reference.ParseNormalizedNamed(image); err == nil {
		repo = named.Name()
	}
	keys := make([]string, 0, len(creds))
	for k := range creds {
		keys = append(keys, k)
	}
	sort.Sort(sort.Reverse(sort.StringSlice(keys))) // more specific paths first
	var out []*runtimeapi.AuthConfig
	for _, k := range keys {
		if urlsMatch(k, repo) {
			out = append(out, creds[k]...)
		}
	}
	if len(out) == 0 && defaultRegistry(repo) {
		out = creds[defaultRegistryHost]
	}
	return out, nil
}

// dockerEntry is one registry's credentials in a docker config.
type dockerEntry struct {
	Username string `json:"username,omitempty"`
	Password string `json:"password,omitempty"`
	Auth     string `json:"auth,omitempty"`
}

// dockerEntries reads the registry entries of a pull secret.
func dockerEntries(s *v1.Secret) (map[string]dockerEntry, error) {
	var entries map[string]dockerEntry
	switch {
	case s.Type == v1.SecretTypeDockerConfigJson && len(s.Data[v1.DockerConfigJsonKey]) > 0:
		var cfg struct {
			Auths map[string]dockerEntry `json:"auths"`
		}
		if err := json.Unmarshal(s.Data[v1.DockerConfigJsonKey], &cfg); err != nil {
			return nil, fmt.Errorf("%s: %w", v1.DockerConfigJsonKey, err)
		}
		entries = cfg.Auths
	case s.Type == v1.SecretTypeDockercfg && len(s.Data[v1.DockerConfigKey]) > 0:
		if err := json.Unmarshal(s.Data[v1.DockerConfigKey], &entries); err != nil {
			return nil, fmt.Errorf("%s: %w", v1.DockerConfigKey, err)
		}
	default:
		return nil, nil
	}
	for loc, e := range entries {
		if e.Auth == "" {
			continue
		}
		user, pass, err := decodeAuth(e.Auth)
		if err != nil {
			return nil, fmt.Errorf("registry %q: %w", loc, err)
		}
		e.Username, e.Password = user, pass
		entries[loc] = e
	}
	return entries, nil
}

// decodeAuth splits a config's auth field, base64("user:password"), padded
// or not.
func decodeAuth(field string) (string, string, error) {
	enc := base64.RawStdEncoding
	if strings.HasSuffix(strings.TrimSpace(field), "=") {
		enc = base64.StdEncoding
	}
	b, err := enc.DecodeString(field)
	if err != nil {
		return "", "", fmt.Errorf("auth: %w", err)
	}
	user, pass, ok := strings.Cut(string(b), ":")
	if !ok {
		return "", "", fmt.Errorf("auth: not base64(username:password)")
	}
	return user, pass, nil
}

// registryKey is a config location as a schemeless key: host[:port][/path],
// with a /v1/ or /v2/ path meaning the host alone (as docker reads it).
func registryKey(loc string) (string, bool) {
	v := loc
	if !strings.HasPrefix(v, "https://") && !strings.HasPrefix(v, "http://") {
		v = "https://" + v
	}
	u, err := url.Parse(v)
	if err != nil {
		return "", false
	}
	p := u.Path
	if strings.HasPrefix(p, "/v2/") || strings.HasPrefix(p, "/v1/") {
		p = p[3:]
	}
	if p == "" || p == "/" {
		return u.Host, true
	}
	return u.Host + p, true
}

// urlsMatch: the key's host matches the repository's label by label ("*"
// globs within a label), the ports are equal, and the key's path is a
// prefix of the repository's.
func urlsMatch(key, repo string) bool {
	k, err1 := url.Parse("https://" + key)
	r, err2 := url.Parse("https://" + repo)
	if err1 != nil || err2 != nil {
		return false
	}
	kh, kp := splitHost(k.Host)
	rh, rp := splitHost(r.Host)
	if kp != rp || len(kh) != len(rh) || !strings.HasPrefix(r.Path, k.Path) {
		return false
	}
	for i := range kh {
		if ok, err := filepath.Match(kh[i], rh[i]); err != nil || !ok {
			return false
		}
	}
	return true
}

func splitHost(hostport string) ([]string, string) {
	host, port, err := net.SplitHostPort(hostport)
	if err != nil {
		host, port = hostport, ""
	}
	return strings.Split(host, "."), port
}

// defaultRegistry reports whether repo comes from the default registry.
func defaultRegistry(repo string) bool {
	first, rest, found := strings.Cut(repo, "/")
	if first == "" {
		return false
	}
	if !found || rest == "" {
		return true
	}
	if first == "docker.io" || first == defaultRegistryHost {
		return true
	}
	return !strings.ContainsAny(first, ".:")
}
