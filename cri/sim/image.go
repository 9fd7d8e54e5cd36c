package sim

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"strings"

	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"
	runtimeapi "k8s.io/cri-api/pkg/apis/runtime/v1"
)

type image struct {
	id   string // "sha256:<hex>", derived from the reference
	ref  string // normalized reference
	size uint64 // bytes; DefaultImageSize unless set by AddImage
}

// DefaultImageSize is the size of an image the runtime pulls: 1 MiB.
const DefaultImageSize = 1 << 20

// ImageFsMountpoint is the mountpoint ImageFsInfo names.
const ImageFsMountpoint = "/sim/images"

// normalizeRef adds ":latest" to a reference without tag or digest.
func normalizeRef(ref string) string {
	if strings.Contains(ref, "@") {
		return ref
	}
	slash := strings.LastIndex(ref, "/")
	if !strings.Contains(ref[slash+1:], ":") {
		return ref + ":latest"
	}
	return ref
}

// addImage makes ref present. r.mu is held (or r is not shared yet).
func (r *Runtime) addImage(ref string) *image {
	if img, ok := r.images[ref]; ok {
		return img
	}
	sum := sha256.Sum256([]byte(ref))
	img := &image{id: "sha256:" + hex.EncodeToString(sum[:]), ref: ref, size: DefaultImageSize}
	r.images[ref] = img
	r.images[img.id] = img
	return img
}

// findImage finds a present image by reference or id. r.mu is held.
func (r *Runtime) findImage(ref string) *image {
	if img, ok := r.images[ref]; ok {
		return img
	}
	return r.images[normalizeRef(ref)]
}

func (img *image) api() *runtimeapi.Image {
	return &runtimeapi.Image{
		Id:       img.id,
		RepoTags: []string{img.ref},
		Size:     img.size,
		Spec:     &runtimeapi.ImageSpec{Image: img.id},
	}
}

// PullImage makes an image present and returns its id. Every reference can
// be pulled except those made missing with MissingImage.
func (r *Runtime) PullImage(ctx context.Context, req *runtimeapi.PullImageRequest) (*runtimeapi.PullImageResponse, error) {
	ref := req.GetImage().GetImage()
	if ref == "" {
		return nil, status.Error(codes.InvalidArgument, "PullImage: empty image reference")
	}
	n := normalizeRef(ref)
	r.mu.Lock()
	defer r.mu.Unlock()
	if r.missing[n] {
		return nil, status.Errorf(codes.NotFound, "failed to pull and unpack image %q: failed to resolve reference %q: %s: not found", n, n, n)
	}
	return &runtimeapi.PullImageResponse{ImageRef: r.addImage(n).id}, nil
}

// ImageStatus returns the image, or no image (and no error) when it is not
// present.
func (r *Runtime) ImageStatus(ctx context.Context, req *runtimeapi.ImageStatusRequest) (*runtimeapi.ImageStatusResponse, error) {
	r.mu.Lock()
	defer r.mu.Unlock()
	img := r.findImage(req.GetImage().GetImage())
	if img == nil {
		return &runtimeapi.ImageStatusResponse{}, nil
	}
	return &runtimeapi.ImageStatusResponse{Image: img.api()}, nil
}

// ListImages lists present images, all or the one named by the filter.
func (r *Runtime) ListImages(ctx context.Context, req *runtimeapi.ListImagesRequest) (*runtimeapi.ListImagesResponse, error) {
	r.mu.Lock()
	defer r.mu.Unlock()
	var out []*runtimeapi.Image
	if want := req.GetFilter().GetImage().GetImage(); want != "" {
		if img := r.findImage(want); img != nil {
			out = append(out, img.api())
		}
		return &runtimeapi.ListImagesResponse{Images: out}, nil
	}
	for k, img := range r.images {
		if k == img.ref {
			out = append(out, img.api())
		}
	}
	return &runtimeapi.ListImagesResponse{Images: out}, nil
}

// RemoveImage removes an image by id or reference; an image that is not
// present is no error (the CRI contract). Like containerd's, it does not
// check whether a container uses the image.
func (r *Runtime) RemoveImage(ctx context.Context, req *runtimeapi.RemoveImageRequest) (*runtimeapi.RemoveImageResponse, error) {
	r.mu.Lock()
	defer r.mu.Unlock()
	if img := r.findImage(req.GetImage().GetImage()); img != nil {
		delete(r.images, img.ref)
		delete(r.images, img.id)
	}
	return &runtimeapi.RemoveImageResponse{}, nil
}

// ImageFsInfo reports one image filesystem at ImageFsMountpoint whose used
// bytes are the sizes of the images present.
func (r *Runtime) ImageFsInfo(ctx context.Context, req *runtimeapi.ImageFsInfoRequest) (*runtimeapi.ImageFsInfoResponse, error) {
	used := r.ImageBytes()
	return &runtimeapi.ImageFsInfoResponse{ImageFilesystems: []*runtimeapi.FilesystemUsage{{
		Timestamp:  r.now(),
		FsId:       &runtimeapi.FilesystemIdentifier{Mountpoint: ImageFsMountpoint},
		UsedBytes:  &runtimeapi.UInt64Value{Value: used},
		InodesUsed: &runtimeapi.UInt64Value{Value: uint64(len(r.images) / 2)},
	}}}, nil
}

// ImageBytes is the sum of the sizes of the images present.
func (r *Runtime) ImageBytes() uint64 {
	r.mu.Lock()
	defer r.mu.Unlock()
	var n uint64
	for k, img := range r.images {
		if k == img.ref {
			n += img.size
		}
	}
	return n
}

// AddImage makes ref present with size bytes, as an image pulled by hand
// (crictl pull) before or beside the engine.
func (r *Runtime) AddImage(ref string, size uint64) {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.addImage(normalizeRef(ref)).size = size
}
