package podspec

import (
	"strings"

	v1 "k8s.io/api/core/v1"
)

// PullPolicy returns the container's effective pull policy: the declared one,
// else Always for ":latest" or untagged images and IfNotPresent otherwise.
func PullPolicy(c *v1.Container) v1.PullPolicy {
	if c.ImagePullPolicy != "" {
		return c.ImagePullPolicy
	}
	img := c.Image
	if strings.Contains(img, "@") {
		return v1.PullIfNotPresent
	}
	slash := strings.LastIndexByte(img, '/')
	colon := strings.LastIndexByte(img, ':')
	if colon <= slash || img[colon+1:] == "latest" {
		return v1.PullAlways
	}
	return v1.PullIfNotPresent
}
