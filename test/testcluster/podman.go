package testcluster

import (
	"fmt"
	"os"
	"path/filepath"
)

// PodmanEnv writes a podman configuration of its own under dir and gives
// the environment variables that make podman use it: runc (crun refuses
// the hybrid cgroups of some kernels), no default ulimits (refused there
// too), cgroupfs and file events (no systemd), vfs storage under dir. The
// image's tests and bench run podman with it, as root.
func PodmanEnv(dir string) ([]string, error) {
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return nil, err
	}
	conf := "[containers]\ndefault_ulimits = []\n\n[engine]\nruntime = \"runc\"\ncgroup_manager = \"cgroupfs\"\nevents_logger = \"file\"\n"
	storage := fmt.Sprintf("[storage]\ndriver = \"vfs\"\ngraphroot = %q\nrunroot = %q\n", filepath.Join(dir, "root"), filepath.Join(dir, "run"))
	files := map[string]string{"containers.conf": conf, "storage.conf": storage}
	for name, content := range files {
		if err := os.WriteFile(filepath.Join(dir, name), []byte(content), 0o644); err != nil {
			return nil, err
		}
	}
	return []string{
		"CONTAINERS_CONF=" + filepath.Join(dir, "containers.conf"),
		"CONTAINERS_STORAGE_CONF=" + filepath.Join(dir, "storage.conf"),
	}, nil
}
