// Package deviceplugin runs Kubernetes' sample device plugin
// (test/images/sample-device-plugin of k8s.io/kubernetes, the plugin the
// node e2e Device Plugin specs use) as a host process beside a speclet
// node, and its test (TestSamplePlugin) checks the node's device-plugin
// manager from the outside: the Node's capacity and allocatable, a pod's
// container given the device the plugin's Allocate returned, the plugin's
// death, and a restart of speclet that keeps the allocation (the
// pod-resources API, a new pod's admission).
//
// The plugin's binary is built from the module once and cached by version
// (BuildSample, `go run ./test/deviceplugin/cmd/buildsampleplugin`,
// `make sample-device-plugin`):
//
//	$HOME/.cache/speclet/sample-device-plugin/<version>/sample-device-plugin
//
// What the plugin does (sampledeviceplugin.go of v1.34.4): it serves two
// healthy devices, Dev-1 and Dev-2, of resource example.com/resource on
// the socket $PLUGIN_SOCK_DIR/dp.<unix time>, registers at the fixed
// /var/lib/kubelet/device-plugins/kubelet.sock, and registers again when
// that socket is made anew (a restarted kubelet). Its Allocate creates the
// empty file /tmp/<device ID> on the host and answers with a mount of it
// at the same path in the container (and a CDI device with $CDI_ENABLED,
// which also writes /var/run/cdi/example.com.json: not used here). With
// $REGISTER_CONTROL_FILE it registers only once that file is removed (not
// used here).
//
// Since its registration socket path is fixed and that directory is the
// machine's (kubelet, node e2e runs), StartSample runs it in a mount
// namespace of its own in which a tmpfs covers /var/lib and the node's
// --device-plugins-dir is bound at /var/lib/kubelet/device-plugins: the
// plugin and speclet meet in the test's directory and nothing outside it
// is touched but the plugin's /tmp/Dev-<n> files, which
// DeviceFilesCleanup removes.
package deviceplugin
