package config

import (
	"fmt"
	"strings"
	"testing"

	v1 "k8s.io/api/core/v1"
)

const webYAML = `apiVersion: v1
kind: Pod
metadata:
  name: web
  labels: {app: web}
spec:
  hostNetwork: true
  containers:
  - name: web
    image: 127.0.0.1:5000/busybox:latest
    command: ["sh", "-c", "sleep 3600"]
    ports: [{containerPort: 8080}]
`

const webJSON = `{"apiVersion":"v1","kind":"Pod","metadata":{"name":"web","namespace":"ops"},
 "spec":{"containers":[{"name":"web","image":"busybox:1.36"}],"restartPolicy":"Never","terminationGracePeriodSeconds":5}}`

func decodeStatic(t *testing.T, data, origin, node string) (*v1.Pod, error) {
	t.Helper()
	p, err := decodePod([]byte(data), origin)
	if err != nil {
		return nil, err
	}
	return staticPod(p, SourceFile, origin, origin, node)
}

func TestStaticPodFromManifest(t *testing.T) {
	p, err := decodeStatic(t, webYAML, "/etc/pods/web.yaml", "Node-1")
	if err != nil {
		t.Fatal(err)
	}
	if p.Name != "web-node-1" || p.Namespace != "default" || p.Spec.NodeName != "Node-1" {
		t.Errorf("name/namespace/node = %s/%s/%s, want web-node-1/default/Node-1", p.Name, p.Namespace, p.Spec.NodeName)
	}
	if len(p.UID) != 32 || p.Annotations[AnnotationHash] != string(p.UID) || p.Annotations[AnnotationSource] != "file" {
		t.Errorf("uid %q annotations %v: want a 32-hex UID, hash annotation = UID, source file", p.UID, p.Annotations)
	}
	if !IsStatic(p) {
		t.Error("IsStatic = false for a file pod")
	}
	c := p.Spec.Containers[0]
	if p.Spec.RestartPolicy != v1.RestartPolicyAlways || *p.Spec.TerminationGracePeriodSeconds != 30 ||
		p.Spec.DNSPolicy != v1.DNSClusterFirst || c.ImagePullPolicy != v1.PullAlways ||
		c.TerminationMessagePath != "/dev/termination-log" || c.Ports[0].Protocol != v1.ProtocolTCP ||
		c.Ports[0].HostPort != 8080 || p.Status.Phase != v1.PodPending {
		t.Errorf("defaults not applied: restart %s grace %d dns %s pull %s tmp %q port %+v phase %s",
			p.Spec.RestartPolicy, *p.Spec.TerminationGracePeriodSeconds, p.Spec.DNSPolicy, c.ImagePullPolicy,
			c.TerminationMessagePath, c.Ports[0], p.Status.Phase)
	}
	if len(p.Spec.Tolerations) != 1 || p.Spec.Tolerations[0].Effect != v1.TaintEffectNoExecute {
		t.Errorf("tolerations = %v, want the NoExecute toleration", p.Spec.Tolerations)
	}

	j, err := decodeStatic(t, webJSON, "/etc/pods/web.json", "node-1")
	if err != nil {
		t.Fatal(err)
	}
	if j.Namespace != "ops" || j.Spec.RestartPolicy != v1.RestartPolicyNever || *j.Spec.TerminationGracePeriodSeconds != 5 ||
		j.Spec.Containers[0].ImagePullPolicy != v1.PullIfNotPresent {
		t.Errorf("JSON manifest: namespace %s restart %s grace %d pull %s", j.Namespace, j.Spec.RestartPolicy,
			*j.Spec.TerminationGracePeriodSeconds, j.Spec.Containers[0].ImagePullPolicy)
	}
}

func TestStaticPodUID(t *testing.T) {
	uid := func(data, origin, node string) string {
		p, err := decodeStatic(t, data, origin, node)
		if err != nil {
			t.Fatal(err)
		}
		return string(p.UID)
	}
	base := uid(webYAML, "/p/web.yaml", "n1")
	if again := uid(webYAML, "/p/web.yaml", "n1"); again != base {
		t.Errorf("same manifest, node and file: uid %s then %s; want stable", base, again)
	}
	// Reformatting that does not change the pod keeps the UID.
	if reformatted := uid("# a comment\n"+webYAML, "/p/web.yaml", "n1"); reformatted != base {
		t.Errorf("comment added: uid changed from %s to %s", base, reformatted)
	}
	edited := strings.Replace(webYAML, "sleep 3600", "sleep 7200", 1)
	for name, other := range map[string]string{
		"edited manifest": uid(edited, "/p/web.yaml", "n1"),
		"other node":      uid(webYAML, "/p/web.yaml", "n2"),
		"other file":      uid(webYAML, "/p/web2.yaml", "n1"),
	} {
		if other == base {
			t.Errorf("%s: uid %s unchanged; want a new pod", name, other)
		}
	}
	given := strings.Replace(webYAML, "name: web\n", "name: web\n  uid: 1234-abcd\n", 1)
	if got := uid(given, "/p/web.yaml", "n1"); got != "1234-abcd" {
		t.Errorf("manifest with metadata.uid: uid %s, want 1234-abcd", got)
	}
}

func TestInvalidManifests(t *testing.T) {
	for _, tc := range []struct {
		name, data string
		want       []string // substrings of the error
	}{
		{"bad yaml", "apiVersion: v1\nkind: Pod\nmetadata: [name: x\n", []string{"/p/m.yaml", "decode"}},
		{"empty", "  \n", []string{"/p/m.yaml", "empty manifest"}},
		{"wrong kind", "apiVersion: apps/v1\nkind: Deployment\nmetadata: {name: x}\n", []string{"/p/m.yaml", "field kind", `"Deployment" is not supported`}},
		{"missing kind", "apiVersion: v1\nmetadata: {name: x}\n", []string{"field kind", "missing"}},
		{"wrong apiVersion", "apiVersion: v2\nkind: Pod\nmetadata: {name: x}\n", []string{"field apiVersion", `"v2"`}},
		{"missing containers", "apiVersion: v1\nkind: Pod\nmetadata: {name: x}\nspec: {}\n", []string{"field spec.containers", "at least one container"}},
		{"missing name", "apiVersion: v1\nkind: Pod\nspec: {containers: [{name: a, image: i}]}\n", []string{"field metadata.name", "required"}},
		{"bad name", "apiVersion: v1\nkind: Pod\nmetadata: {name: Web_1}\nspec: {containers: [{name: a, image: i}]}\n", []string{"field metadata.name", `"Web_1"`}},
		{"wrong type", "apiVersion: v1\nkind: Pod\nmetadata: {name: x}\nspec: {restartPolicy: 5, containers: [{name: a, image: i}]}\n", []string{"/p/m.yaml", "restartPolicy"}},
		{"bad restart policy", "apiVersion: v1\nkind: Pod\nmetadata: {name: x}\nspec: {restartPolicy: Sometimes, containers: [{name: a, image: i}]}\n", []string{"field spec.restartPolicy", `"Sometimes"`}},
		{"unknown field", "apiVersion: v1\nkind: Pod\nmetadata: {name: x}\nspec: {restartPolicey: Never, containers: [{name: a, image: i}]}\n", []string{"/p/m.yaml", "field spec.restartPolicey: unknown field"}},
		{"unknown nested field", "apiVersion: v1\nkind: Pod\nmetadata: {name: x}\nspec: {containers: [{name: a, image: i, resources: {limits: {cpu: 100m}}, imagePullPolicey: Never}]}\n", []string{"field spec.containers[0].imagePullPolicey: unknown field"}},
		{"duplicate container names", "apiVersion: v1\nkind: Pod\nmetadata: {name: x}\nspec: {initContainers: [{name: a, image: i}], containers: [{name: a, image: i}]}\n", []string{"field spec.containers[0].name", `"a": duplicate of spec.initContainers[0]`}},
		{"missing image", "apiVersion: v1\nkind: Pod\nmetadata: {name: x}\nspec: {containers: [{name: a}]}\n", []string{"field spec.containers[0].image", "required"}},
		{"bad pull policy", "apiVersion: v1\nkind: Pod\nmetadata: {name: x}\nspec: {containers: [{name: a, image: i, imagePullPolicy: Sometimes}]}\n", []string{"field spec.containers[0].imagePullPolicy"}},
		{"negative grace", "apiVersion: v1\nkind: Pod\nmetadata: {name: x}\nspec: {terminationGracePeriodSeconds: -1, containers: [{name: a, image: i}]}\n", []string{"field spec.terminationGracePeriodSeconds", "negative"}},
		{"bad port", "apiVersion: v1\nkind: Pod\nmetadata: {name: x}\nspec: {containers: [{name: a, image: i, ports: [{containerPort: 70000}]}]}\n", []string{"field spec.containers[0].ports[0].containerPort", "70000"}},
		{"restart policy on a regular container", "apiVersion: v1\nkind: Pod\nmetadata: {name: x}\nspec: {containers: [{name: a, image: i, restartPolicy: Always}]}\n", []string{"field spec.containers[0].restartPolicy", "only init containers"}},
		{"annotations over 256 KiB", "apiVersion: v1\nkind: Pod\nmetadata: {name: x, annotations: {a: " + strings.Repeat("x", 200<<10) + ", b: " + strings.Repeat("y", 100<<10) + "}}\nspec: {containers: [{name: a, image: i}]}\n", []string{"/p/m.yaml", "field metadata.annotations", "more than the 262144 bytes (256 KiB) allowed"}},
		{"bad annotation key", "apiVersion: v1\nkind: Pod\nmetadata: {name: x, annotations: {'bad key!': v}}\nspec: {containers: [{name: a, image: i}]}\n", []string{"field metadata.annotations", "bad key!"}},
		{"bad label value", "apiVersion: v1\nkind: Pod\nmetadata: {name: x, labels: {app: 'not a value!'}}\nspec: {containers: [{name: a, image: i}]}\n", []string{"field metadata.labels", "not a value!"}},
		{"label value too long", "apiVersion: v1\nkind: Pod\nmetadata: {name: x, labels: {app: " + strings.Repeat("a", 64) + "}}\nspec: {containers: [{name: a, image: i}]}\n", []string{"field metadata.labels", "63"}},
		{"image too long", "apiVersion: v1\nkind: Pod\nmetadata: {name: x}\nspec: {containers: [{name: a, image: " + strings.Repeat("i", 600) + "}]}\n", []string{"field spec.containers[0].image", "600 characters, more than the 512"}},
		{"too many containers", "apiVersion: v1\nkind: Pod\nmetadata: {name: x}\nspec: {containers: [" + manyContainers(25) + "]}\n", []string{"field spec.containers", "25 init and regular containers"}},
		{"uid that is not a path component", "apiVersion: v1\nkind: Pod\nmetadata: {name: x, uid: ../../etc}\nspec: {containers: [{name: a, image: i}]}\n", []string{"field metadata.uid", `"../../etc"`}},
		{"hostPath with backsteps", "apiVersion: v1\nkind: Pod\nmetadata: {name: x}\nspec: {containers: [{name: a, image: i}], volumes: [{name: ok, hostPath: {path: /srv/ok}}, {name: etc, hostPath: {path: /srv/data/../../etc}}]}\n", []string{"/p/m.yaml", `field spec.volumes[1].hostPath.path: Invalid value: "/srv/data/../../etc": must not contain '..'`}},
		{"hostPath relative backstep", "apiVersion: v1\nkind: Pod\nmetadata: {name: x}\nspec: {containers: [{name: a, image: i}], volumes: [{name: up, hostPath: {path: ../up}}]}\n", []string{`field spec.volumes[0].hostPath.path: Invalid value: "../up": must not contain '..'`}},
		{"hostPath without a path", "apiVersion: v1\nkind: Pod\nmetadata: {name: x}\nspec: {containers: [{name: a, image: i}], volumes: [{name: none, hostPath: {path: ''}}]}\n", []string{"field spec.volumes[0].hostPath.path: Required value"}},
		{"hostUsers false on the node's namespaces", "apiVersion: v1\nkind: Pod\nmetadata: {name: x}\nspec: {hostUsers: false, hostNetwork: true, hostPID: true, hostIPC: true, containers: [{name: a, image: i, volumeDevices: [{name: b, devicePath: /dev/b}]}]}\n",
			[]string{"field spec.hostNetwork: Forbidden: when `hostUsers` is false", "field spec.hostPID: Forbidden: when `hostUsers` is false",
				"field spec.hostIPC: Forbidden: when `hostUsers` is false", "field spec.containers[0].volumeDevices: Forbidden: when `hostUsers` is false"}},
		{"hostPath of an unknown type", "apiVersion: v1\nkind: Pod\nmetadata: {name: x}\nspec: {containers: [{name: a, image: i}], volumes: [{name: t, hostPath: {path: /srv, type: Folder}}]}\n", []string{`field spec.volumes[0].hostPath.type: Unsupported value: "Folder"`}},
		{"two YAML documents", webYAML + "---\n" + webYAML, []string{"/p/m.yaml", "2 YAML documents", "its own file"}},
		{"duplicate key", "apiVersion: v1\nkind: Pod\nmetadata: {name: x}\nspec:\n  restartPolicy: Never\n  restartPolicy: Always\n  containers: [{name: a, image: i}]\n", []string{"/p/m.yaml", "duplicate key", "restartPolicy"}},
		{"duplicate key in JSON", `{"apiVersion":"v1","kind":"Pod","metadata":{"name":"x","name":"y"},"spec":{"containers":[{"name":"a","image":"i"}]}}`, []string{"/p/m.yaml", "duplicate key", "name"}},
		{"init container restart policy Never", "apiVersion: v1\nkind: Pod\nmetadata: {name: x}\nspec: {initContainers: [{name: s, image: i, restartPolicy: Never}], containers: [{name: a, image: i}]}\n", []string{"field spec.initContainers[0].restartPolicy", "only say Always"}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			p, err := decodeStatic(t, tc.data, "/p/m.yaml", "n1")
			if err == nil {
				t.Fatalf("accepted: %s/%s", p.Namespace, p.Name)
			}
			for _, w := range tc.want {
				if !strings.Contains(err.Error(), w) {
					t.Errorf("error %q does not contain %q", err, w)
				}
			}
		})
	}
}

func TestDefaultPullPolicy(t *testing.T) {
	for image, want := range map[string]v1.PullPolicy{
		"busybox":                         v1.PullAlways,
		"busybox:latest":                  v1.PullAlways,
		"busybox:1.36":                    v1.PullIfNotPresent,
		"127.0.0.1:5000/busybox":          v1.PullAlways,
		"127.0.0.1:5000/busybox:latest":   v1.PullAlways,
		"127.0.0.1:5000/busybox:v2":       v1.PullIfNotPresent,
		"busybox@sha256:0123456789abcdef": v1.PullIfNotPresent,
	} {
		if got := DefaultPullPolicy(image); got != want {
			t.Errorf("DefaultPullPolicy(%q) = %s, want %s", image, got, want)
		}
	}
}

func manyContainers(n int) string {
	var cs []string
	for i := 0; i < n; i++ {
		cs = append(cs, fmt.Sprintf("{name: c%d, image: i}", i))
	}
	return strings.Join(cs, ", ")
}

func TestDocumentSeparatorAloneIsOneDocument(t *testing.T) {
	if _, err := decodeStatic(t, "---\n"+webYAML, "/p/m.yaml", "n1"); err != nil {
		t.Fatalf("a manifest starting with --- is one document: %v", err)
	}
}

// TestLimitsDefaultRequests: a container with only limits gets them as its
// requests (the API server's defaulting), which makes the pod Guaranteed;
// an explicit request is kept.
func TestLimitsDefaultRequests(t *testing.T) {
	const m = `
apiVersion: v1
kind: Pod
metadata: {name: g}
spec:
  containers:
  - name: a
    image: busybox:1
    resources:
      limits: {cpu: 200m, memory: 64Mi}
  - name: b
    image: busybox:1
    resources:
      requests: {cpu: 100m}
      limits: {cpu: 200m}
`
	p, err := decodeStatic(t, m, "/etc/pods/g.yaml", "n")
	if err != nil {
		t.Fatal(err)
	}
	a, b := p.Spec.Containers[0].Resources.Requests, p.Spec.Containers[1].Resources.Requests
	if a.Cpu().String() != "200m" || a.Memory().String() != "64Mi" {
		t.Errorf("container a requests %v, want the limits", a)
	}
	if b.Cpu().String() != "100m" {
		t.Errorf("container b cpu request %v, want the explicit 100m", b.Cpu())
	}
}
