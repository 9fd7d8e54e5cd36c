// Package staticuid is the UID kubelet v1.34 gives a static pod whose
// manifest sets none (pkg/kubelet/config/common.go, applyDefaults): the MD5
// of the pod as kubelet's legacy scheme decodes it (the v1 pod defaulted,
// then converted to the internal API type of k8s.io/kubernetes/pkg/apis/core),
// printed by k8s.io/kubernetes/pkg/util/hash.DeepHashObject, followed by
// "host:<node>file:<path>" for a manifest file or "url:<url>" for a manifest
// URL. Because the printing walks the internal type's fields, only that type
// gives the same bytes: this package is the one place speclet imports
// k8s.io/kubernetes, and only engine/config imports it.
//
// The same UID on both agents is what lets either one adopt the other's
// running pod from the same manifest (docs/operations.md, "Swapping the
// node agent").
package staticuid

import (
	"crypto/md5"
	"encoding/hex"
	"fmt"

	v1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/kubernetes/pkg/api/legacyscheme"
	api "k8s.io/kubernetes/pkg/apis/core"
	_ "k8s.io/kubernetes/pkg/apis/core/install" // the v1 defaults and conversions kubelet decodes with
	"k8s.io/kubernetes/pkg/util/hash"
)

// The sources a static pod comes from, as they enter the hash.
const (
	File = "file" // key is the manifest's path; the node name enters too
	URL  = "url"  // key is the manifest URL
)

// Of returns the UID kubelet gives pod, a manifest as decoded (before any
// of speclet's defaults), read from key (a path for File, a URL for URL) on
// node nodeName. It does not change pod.
func Of(pod *v1.Pod, source, key, nodeName string) (types.UID, error) {
	p := pod.DeepCopy()
	legacyscheme.Scheme.Default(p)
	var internal api.Pod
	if err := legacyscheme.Scheme.Convert(p, &internal, nil); err != nil {
		return "", fmt.Errorf("convert pod %q to the internal API for its UID: %w", pod.Name, err)
	}
	// The decoder's internal object carries no kind.
	internal.TypeMeta = metav1.TypeMeta{}
	h := md5.New()
	hash.DeepHashObject(h, &internal)
	switch source {
	case File:
		fmt.Fprintf(h, "host:%s", nodeName)
		fmt.Fprintf(h, "file:%s", key)
	case URL:
		fmt.Fprintf(h, "url:%s", key)
	default:
		return "", fmt.Errorf("static pod %q: unknown source %q", pod.Name, source)
	}
	return types.UID(hex.EncodeToString(h.Sum(nil))), nil
}
