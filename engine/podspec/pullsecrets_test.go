package podspec

import (
	"encoding/base64"
	"reflect"
	"strings"
	"testing"

	v1 "k8s.io/api/core/v1"
)

func TestPullCredentials(t *testing.T) {
	b64 := func(s string) string { return base64.StdEncoding.EncodeToString([]byte(s)) }
	cfgJSON := func(name, auths string) *v1.Secret {
		s := &v1.Secret{Type: v1.SecretTypeDockerConfigJson, Data: map[string][]byte{v1.DockerConfigJsonKey: []byte(`{"auths":{` + auths + `}}`)}}
		s.Name = name
		return s
	}
	cfgOld := func(name, auths string) *v1.Secret {
		s := &v1.Secret{Type: v1.SecretTypeDockercfg, Data: map[string][]byte{v1.DockerConfigKey: []byte(`{` + auths + `}`)}}
		s.Name = name
		return s
	}
	for _, tc := range []struct {
		name    string
		image   string
		secrets []*v1.Secret
		want    []string // user:password in order
		err     string
	}{
		{"no secrets", "127.0.0.1:5000/busybox", nil, nil, ""},
		{"host and port match", "127.0.0.1:5000/busybox:1.37",
			[]*v1.Secret{cfgJSON("s", `"127.0.0.1:5000":{"username":"u","password":"p"}`)}, []string{"u:p"}, ""},
		{"other port", "127.0.0.1:5000/busybox",
			[]*v1.Secret{cfgJSON("s", `"127.0.0.1:5001":{"username":"u","password":"p"}`)}, nil, ""},
		{"auth field, scheme and /v2/", "registry.example:5000/team/app@sha256:" + strings.Repeat("a", 64),
			[]*v1.Secret{cfgJSON("s", `"https://registry.example:5000/v2/":{"auth":"`+b64("alice:s3cret")+`"}`)}, []string{"alice:s3cret"}, ""},
		{"path prefix, most specific first", "registry.example/team/app",
			[]*v1.Secret{cfgJSON("s", `"registry.example":{"username":"host","password":"1"},"registry.example/team":{"username":"team","password":"2"},"registry.example/other":{"username":"other","password":"3"}`)},
			[]string{"team:2", "host:1"}, ""},
		{"glob host", "eu.registry.example/app",
			[]*v1.Secret{cfgJSON("s", `"*.registry.example":{"username":"g","password":"p"}`)}, []string{"g:p"}, ""},
		{"default registry", "busybox",
			[]*v1.Secret{cfgOld("s", `"index.docker.io":{"username":"hub","password":"p"}`)}, []string{"hub:p"}, ""},
		{"opaque secret ignored", "127.0.0.1:5000/busybox",
			[]*v1.Secret{{Type: v1.SecretTypeOpaque, Data: map[string][]byte{v1.DockerConfigJsonKey: []byte("{")}}}, nil, ""},
		{"two secrets in order", "127.0.0.1:5000/busybox",
			[]*v1.Secret{cfgJSON("a", `"127.0.0.1:5000":{"username":"a","password":"1"}`), cfgJSON("b", `"127.0.0.1:5000":{"username":"b","password":"2"}`)},
			[]string{"a:1", "b:2"}, ""},
		{"broken config names the secret", "busybox", []*v1.Secret{cfgJSON("creds", `"x":`)}, nil, `image pull secret "creds": .dockerconfigjson:`},
		{"broken auth", "busybox", []*v1.Secret{cfgJSON("creds", `"x":{"auth":"`+b64("nocolon")+`"}`)}, nil, `image pull secret "creds": registry "x": auth: not base64(username:password)`},
	} {
		t.Run(tc.name, func(t *testing.T) {
			got, err := PullCredentials(tc.image, tc.secrets)
			if erred(t, err, tc.err) {
				return
			}
			var pairs []string
			for _, a := range got {
				pairs = append(pairs, a.Username+":"+a.Password)
			}
			if !reflect.DeepEqual(pairs, tc.want) {
				t.Errorf("credentials %q, want %q", pairs, tc.want)
			}
		})
	}
}
