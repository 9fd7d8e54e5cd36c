package nodeconformance

import (
	"archive/tar"
	"bytes"
	"context"
	"fmt"
	"io"
	"os"
	"sort"
	"strings"
	"time"

	v1 "github.com/google/go-containerregistry/pkg/v1"
	"github.com/google/go-containerregistry/pkg/v1/mutate"
	"github.com/google/go-containerregistry/pkg/v1/tarball"

	"github.com/speclet/speclet/cri/harness"
)

// Image is one image of the suite as k8s.io/kubernetes/test/utils/image
// names it (registry key, name, tag), and how it is made here.
type Image struct {
	// Registry is the key of KUBE_TEST_REPO_LIST that holds the image
	// (promoterE2eRegistry, gcRegistry).
	Registry string
	Name     string
	Tag      string
	// Made says what the image holds.
	Made string
}

// Images are the images the suite's node specs pull that are built here.
// Every other image of test/utils/image is absent from the registry: a spec
// that needs one fails to pull it, and is listed in Skips with that reason.
var Images = []Image{
	{"promoterE2eRegistry", "agnhost", "2.56", "agnhost of test/images/agnhost (static) as /agnhost and /agnhost-2, porter's /localhost.crt and /localhost.key, a curl that runs busybox wget -q -O - (the specs call `curl <url>`), over the busybox layer; entrypoint /agnhost, command pause; user 1000 and group 50000 as in the upstream image"},
	{"promoterE2eRegistry", "busybox", "1.37.0-1", "Debian's busybox-static with a link per applet (cri/harness), and an nmeter that prints the time of day as the suite's specs read it (`nmeter -d0 '%3t'`: Debian's busybox has no nmeter)"},
	{"promoterE2eRegistry", "nonroot", "1.4", "the busybox image with USER 1234"},
	{"promoterE2eRegistry", "nonewprivs", "1.3", "test/images/nonewprivs' nnp (static), set-user-ID root, at /usr/local/bin/nnp over the busybox layer; command nnp"},
	{"gcRegistry", "pause", "3.10.1", "the cri/harness pause image (busybox sh sleeping until SIGTERM)"},
}

// NodeE2EImages are the images only the node e2e suite's specs pull
// (test/nodee2e; PushNodeE2EImages), made here as stand-ins: the specs run
// them and never look inside.
var NodeE2EImages = []Image{
	{"promoterE2eRegistry", "nginx", "1.14-4", "a stand-in for nginx (Debian has no static nginx): the busybox image serving /usr/share/nginx/html on port 80 with busybox httpd in the foreground; the mirror pod specs' static pods run it"},
}

// Registries are the KUBE_TEST_REPO_LIST keys with the path each gets on the
// local registry. invalidRegistry points at a closed loopback port so that
// pulling from it fails without leaving the machine.
var registries = map[string]string{
	"gcAuthenticatedRegistry":  "authenticated",
	"promoterE2eRegistry":      "e2e-test-images",
	"buildImageRegistry":       "build-image",
	"gcEtcdRegistry":           "k8s",
	"gcRegistry":               "k8s",
	"sigStorageRegistry":       "sig-storage",
	"privateRegistry":          "private",
	"dockerLibraryRegistry":    "library",
	"cloudProviderGcpRegistry": "cloud-provider-gcp",
}

// InvalidRegistry is the suite's invalidRegistry: nothing listens on port 1.
const InvalidRegistry = "127.0.0.1:1/invalid"

// RepoList returns the KUBE_TEST_REPO_LIST file's content for a registry at
// addr (host:port).
func RepoList(addr string) string {
	keys := make([]string, 0, len(registries))
	for k := range registries {
		keys = append(keys, k)
	}
	sort.Strings(keys)
	var b strings.Builder
	for _, k := range keys {
		fmt.Fprintf(&b, "%s: %s/%s\n", k, addr, registries[k])
	}
	fmt.Fprintf(&b, "invalidRegistry: %s\n", InvalidRegistry)
	return b.String()
}

// layerTime fixes every file's time so that the images' digests depend only
// on their content.
var layerTime = time.Date(2024, 1, 1, 0, 0, 0, 0, time.UTC)

// PushImages builds Images from the binaries and pushes them to reg under
// the paths RepoList names, with the images every harness containerd
// expects (harness.PushDefaults).
func PushImages(ctx context.Context, reg *harness.Registry, bins Binaries) error {
	if err := reg.PushDefaults(ctx); err != nil {
		return err
	}
	bb, err := harness.BusyboxImage()
	if err != nil {
		return fmt.Errorf("build images: %w", err)
	}
	// Every image of the suite's is over busybox with nmeter (nmeterScript).
	base, err := imageWith(bb, []file{{name: "bin/nmeter", mode: 0o755, body: nmeterScript}}, nil)
	if err != nil {
		return fmt.Errorf("build image busybox: %w", err)
	}
	pause, err := harness.PauseImage()
	if err != nil {
		return fmt.Errorf("build images: %w", err)
	}
	agnhost, err := imageWith(base, []file{
		{name: "agnhost", mode: 0o755, src: bins.Agnhost},
		{name: "agnhost-2", link: "agnhost"},
		{name: "uploads/", mode: 0o755},
		// The lifecycle hook specs run `curl <url>` in agnhost; the
		// upstream image has curl from Alpine, this one busybox's wget.
		{name: "usr/local/", mode: 0o755},
		{name: "usr/local/bin/", mode: 0o755},
		{name: "usr/local/bin/curl", mode: 0o755, body: "#!/bin/sh\n# curl URL, as the suite's specs call it: busybox wget to stdout.\nexec wget -q -O - \"$@\"\n"},
		{name: "localhost.crt", mode: 0o644, src: bins.LocalhostCrt},
		{name: "localhost.key", mode: 0o644, src: bins.LocalhostKey},
		{name: "etc/passwd", mode: 0o644, body: "root:x:0:0:root:/root:/bin/sh\nnobody:x:65534:65534:nobody:/nonexistent:/bin/false\nuser-defined-in-image:x:1000:1000::/home/user-defined-in-image:/bin/sh\n"},
		{name: "etc/group", mode: 0o644, body: "root:x:0:\nnogroup:x:65534:\nuser-defined-in-image:x:1000:\ngroup-defined-in-image:x:50000:user-defined-in-image\n"},
	}, func(c *v1.Config) { c.Entrypoint = []string{"/agnhost"}; c.Cmd = []string{"pause"} })
	if err != nil {
		return fmt.Errorf("build image agnhost: %w", err)
	}
	nonroot, err := imageWith(base, nil, func(c *v1.Config) { c.User = "1234" })
	if err != nil {
		return fmt.Errorf("build image nonroot: %w", err)
	}
	nonewprivs, err := imageWith(base, []file{
		{name: "usr/local/", mode: 0o755},
		{name: "usr/local/bin/", mode: 0o755},
		{name: "usr/local/bin/nnp", mode: 0o4755, src: bins.Nonewprivs},
	}, func(c *v1.Config) { c.Cmd = []string{"nnp"} })
	if err != nil {
		return fmt.Errorf("build image nonewprivs: %w", err)
	}
	built := map[string]v1.Image{"agnhost": agnhost, "busybox": base, "nonroot": nonroot, "nonewprivs": nonewprivs, "pause": pause}
	for _, im := range Images {
		img := built[im.Name]
		if img == nil {
			return fmt.Errorf("build images: no recipe for %s", im.Name)
		}
		if _, err := reg.Push(ctx, registries[im.Registry]+"/"+im.Name+":"+im.Tag, img); err != nil {
			return err
		}
	}
	return nil
}

// PushNodeE2EImages pushes what PushImages pushes and NodeE2EImages.
func PushNodeE2EImages(ctx context.Context, reg *harness.Registry, bins Binaries) error {
	if err := PushImages(ctx, reg, bins); err != nil {
		return err
	}
	base, err := harness.BusyboxImage()
	if err != nil {
		return fmt.Errorf("build images: %w", err)
	}
	nginx, err := imageWith(base, []file{
		{name: "usr/share/nginx/", mode: 0o755},
		{name: "usr/share/nginx/html/", mode: 0o755},
		{name: "usr/share/nginx/html/index.html", mode: 0o644, body: "<!DOCTYPE html>\n<title>Welcome to nginx!</title>\n"},
	}, func(c *v1.Config) {
		c.Entrypoint = nil
		c.Cmd = []string{"httpd", "-f", "-p", "80", "-h", "/usr/share/nginx/html"}
		c.ExposedPorts = map[string]struct{}{"80/tcp": {}}
	})
	if err != nil {
		return fmt.Errorf("build image nginx: %w", err)
	}
	built := map[string]v1.Image{"nginx": nginx}
	for _, im := range NodeE2EImages {
		img := built[im.Name]
		if img == nil {
			return fmt.Errorf("build images: no recipe for %s", im.Name)
		}
		if _, err := reg.Push(ctx, registries[im.Registry]+"/"+im.Name+":"+im.Tag, img); err != nil {
			return err
		}
	}
	return nil
}

// file is one entry of an added layer: a directory (name ends in "/"), a
// symlink (link), a file read from src, or a file with body.
type file struct {
	name, link, src, body string
	mode                  int64
}

func imageWith(base v1.Image, files []file, configure func(*v1.Config)) (v1.Image, error) {
	img := base
	if len(files) > 0 {
		var buf bytes.Buffer
		tw := tar.NewWriter(&buf)
		for _, f := range files {
			h := &tar.Header{Name: f.name, Mode: f.mode, ModTime: layerTime}
			var body []byte
			switch {
			case strings.HasSuffix(f.name, "/"):
				h.Typeflag = tar.TypeDir
			case f.link != "":
				h.Typeflag, h.Linkname, h.Mode = tar.TypeSymlink, f.link, 0o777
			case f.src != "":
				b, err := os.ReadFile(f.src)
				if err != nil {
					return nil, err
				}
				body = b
			default:
				body = []byte(f.body)
			}
			if h.Typeflag == 0 {
				h.Typeflag, h.Size = tar.TypeReg, int64(len(body))
			}
			if err := tw.WriteHeader(h); err != nil {
				return nil, err
			}
			if _, err := tw.Write(body); err != nil {
				return nil, err
			}
		}
		if err := tw.Close(); err != nil {
			return nil, err
		}
		data := buf.Bytes()
		layer, err := tarball.LayerFromOpener(func() (io.ReadCloser, error) { return io.NopCloser(bytes.NewReader(data)), nil })
		if err != nil {
			return nil, err
		}
		if img, err = mutate.AppendLayers(img, layer); err != nil {
			return nil, err
		}
	}
	cf, err := img.ConfigFile()
	if err != nil {
		return nil, err
	}
	cf = cf.DeepCopy()
	if configure != nil {
		configure(&cf.Config)
	}
	return mutate.ConfigFile(img, cf)
}

// nmeterScript is /bin/nmeter of the suite's images: what busybox's
// `nmeter -d0 '%3t'` prints first, the time of day as HH:MM:SS.mmm (UTC, the
// containers' zone), which the container lifecycle specs put between
// `date -u +%FT` and `Z` to time each container's log lines
// (container_lifecycle_pod_construction.go). Debian's busybox-static has no
// nmeter applet and its date no sub-second format; adjtimex reads the clock
// with its fraction (nanoseconds when the kernel's STA_NANO status bit is set,
// else microseconds). Other nmeter formats are refused.
const nmeterScript = `#!/bin/sh
case "$*" in
"-d0 %3t") ;;
*) echo "nmeter: only nmeter -d0 '%3t' is served here, not: $*" >&2; exit 2 ;;
esac
eval "$(adjtimex | sed -n 's/^ *status: *\([0-9]*\).*/st=\1/p; s/^ *time.tv_sec: *\([0-9]*\).*/s=\1/p; s/^ *time.tv_usec: *\([0-9]*\).*/u=\1/p')"
if [ $((st & 8192)) -ne 0 ]; then ms=$((u / 1000000)); else ms=$((u / 1000)); fi
printf '%s.%03d\n' "$(date -u -d "@$s" +%T)" "$ms"
`
