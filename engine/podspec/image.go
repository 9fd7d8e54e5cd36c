package podspec

import (
	"fmt"
	"strings"

	"github.com/distribution/reference"
	v1 "k8s.io/api/core/v1"
)

// ImageNameError is kubelet's InvalidImageName message for an image
// reference that does not parse (as a normalized name, with an optional tag
// or digest); nil for a valid one. Such an image is never pulled.
func ImageNameError(image string) error {
	if _, err := reference.ParseNormalizedNamed(image); err != nil {
		return fmt.Errorf("Failed to apply default image tag %q: couldn't parse image name %q: %v", image, image, err)
	}
	return nil
}

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
