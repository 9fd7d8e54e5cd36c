package harness

import (
	"archive/tar"
	"bytes"
	"fmt"
	"io"
	"os"
	"os/exec"
	"runtime"
	"sort"
	"strings"
	"sync"
	"time"

	v1 "github.com/google/go-containerregistry/pkg/v1"
	"github.com/google/go-containerregistry/pkg/v1/empty"
	"github.com/google/go-containerregistry/pkg/v1/mutate"
	"github.com/google/go-containerregistry/pkg/v1/tarball"
)

// BusyboxPath is the statically linked busybox of Debian's busybox-static
// package, the only binary in the harness's images.
const BusyboxPath = "/bin/busybox"

// PauseCommand is the pause image's entrypoint: it sleeps until SIGTERM or
// SIGINT and then exits 0.
var PauseCommand = []string{"/bin/sh", "-c", "trap 'exit 0' TERM INT; while :; do sleep 3600 & wait $!; done"}

// imageEnv is the environment both images declare.
var imageEnv = []string{"PATH=/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin"}

// layerTime is the fixed modification time of every file in the layer, so
// that the images' digests depend only on the busybox binary.
var layerTime = time.Date(2024, 1, 1, 0, 0, 0, 0, time.UTC)

var busyboxLayer struct {
	once sync.Once
	tar  []byte
	err  error
}

// BusyboxImage returns an image holding /bin/busybox of busybox-static with a
// symlink in /bin for every applet it lists (sh, sleep, echo, cat, ls, true,
// false, kill, ...), the directories a container expects (/tmp, /etc, /proc,
// /dev, /sys, /root), /etc/passwd and /etc/group for root (also in wheel)
// and nobody, and
// "sh" as its command. The layer is built once per process.
func BusyboxImage() (v1.Image, error) {
	layer, err := rootfsLayer()
	if err != nil {
		return nil, err
	}
	return configure(layer, nil, []string{"sh"})
}

// PauseImage returns the sandbox image: the busybox layer with PauseCommand as
// its entrypoint, so a sandbox sleeps until it is stopped and exits at once
// on SIGTERM.
func PauseImage() (v1.Image, error) {
	layer, err := rootfsLayer()
	if err != nil {
		return nil, err
	}
	return configure(layer, PauseCommand, nil)
}

func configure(layer v1.Layer, entrypoint, cmd []string) (v1.Image, error) {
	img, err := mutate.AppendLayers(empty.Image, layer)
	if err != nil {
		return nil, fmt.Errorf("append busybox layer: %w", err)
	}
	cf, err := img.ConfigFile()
	if err != nil {
		return nil, fmt.Errorf("read image config: %w", err)
	}
	cf = cf.DeepCopy()
	cf.OS = "linux"
	cf.Architecture = runtime.GOARCH
	cf.Created = v1.Time{Time: layerTime}
	cf.Config.Env = imageEnv
	cf.Config.Entrypoint = entrypoint
	cf.Config.Cmd = cmd
	cf.Config.WorkingDir = "/"
	img, err = mutate.ConfigFile(img, cf)
	if err != nil {
		return nil, fmt.Errorf("set image config: %w", err)
	}
	return img, nil
}

func rootfsLayer() (v1.Layer, error) {
	busyboxLayer.once.Do(func() {
		busyboxLayer.tar, busyboxLayer.err = buildRootfsTar(BusyboxPath)
	})
	if busyboxLayer.err != nil {
		return nil, busyboxLayer.err
	}
	data := busyboxLayer.tar
	layer, err := tarball.LayerFromOpener(func() (io.ReadCloser, error) {
		return io.NopCloser(bytes.NewReader(data)), nil
	})
	if err != nil {
		return nil, fmt.Errorf("make busybox layer: %w", err)
	}
	return layer, nil
}

// buildRootfsTar writes the root filesystem of the busybox image as a tar.
func buildRootfsTar(busybox string) ([]byte, error) {
	bin, err := os.ReadFile(busybox)
	if err != nil {
		return nil, fmt.Errorf("read busybox (install busybox-static): %w", err)
	}
	applets, err := listApplets(busybox)
	if err != nil {
		return nil, err
	}
	var buf bytes.Buffer
	tw := tar.NewWriter(&buf)
	dir := func(name string, mode int64) error {
		return tw.WriteHeader(&tar.Header{Typeflag: tar.TypeDir, Name: name + "/", Mode: mode, ModTime: layerTime})
	}
	file := func(name string, mode int64, body []byte) error {
		if err := tw.WriteHeader(&tar.Header{Typeflag: tar.TypeReg, Name: name, Mode: mode, Size: int64(len(body)), ModTime: layerTime}); err != nil {
			return err
		}
		_, err := tw.Write(body)
		return err
	}
	for _, d := range []struct {
		name string
		mode int64
	}{{"bin", 0o755}, {"dev", 0o755}, {"etc", 0o755}, {"proc", 0o555}, {"root", 0o700}, {"sys", 0o555}, {"tmp", 0o1777}, {"usr", 0o755}, {"usr/bin", 0o755}, {"var", 0o755}} {
		if err := dir(d.name, d.mode); err != nil {
			return nil, fmt.Errorf("write layer: %w", err)
		}
	}
	if err := file("bin/busybox", 0o755, bin); err != nil {
		return nil, fmt.Errorf("write layer: %w", err)
	}
	if err := file("etc/passwd", 0o644, []byte("root:x:0:0:root:/root:/bin/sh\nnobody:x:65534:65534:nobody:/nonexistent:/bin/false\n")); err != nil {
		return nil, fmt.Errorf("write layer: %w", err)
	}
	// root is a member of wheel, as in busybox's own /etc/group: a
	// container's groups from the image (supplementalGroupsPolicy Merge,
	// dropped under Strict).
	if err := file("etc/group", 0o644, []byte("root:x:0:\nwheel:x:10:root\nnogroup:x:65534:\n")); err != nil {
		return nil, fmt.Errorf("write layer: %w", err)
	}
	for _, a := range applets {
		if err := tw.WriteHeader(&tar.Header{Typeflag: tar.TypeSymlink, Name: "bin/" + a, Linkname: "busybox", Mode: 0o777, ModTime: layerTime}); err != nil {
			return nil, fmt.Errorf("write layer: %w", err)
		}
	}
	if err := tw.Close(); err != nil {
		return nil, fmt.Errorf("write layer: %w", err)
	}
	return buf.Bytes(), nil
}

// listApplets asks busybox for its applets; names with a slash or the name
// busybox itself are left out.
func listApplets(busybox string) ([]string, error) {
	out, err := exec.Command(busybox, "--list").Output()
	if err != nil {
		return nil, fmt.Errorf("list busybox applets (%s --list): %w", busybox, err)
	}
	var applets []string
	for _, a := range strings.Fields(string(out)) {
		if a == "busybox" || strings.Contains(a, "/") {
			continue
		}
		applets = append(applets, a)
	}
	sort.Strings(applets)
	for _, need := range []string{"sh", "sleep", "echo", "cat", "ls", "true", "false", "kill"} {
		if i := sort.SearchStrings(applets, need); i == len(applets) || applets[i] != need {
			return nil, fmt.Errorf("busybox %s lacks the %q applet", busybox, need)
		}
	}
	return applets, nil
}
