// Command image writes the companion's OCI image (`make image`) from files
// the build makes itself, with no base image to pull and no daemon: the
// provider's static binary as the entrypoint, a static OpenTofu (or
// Terraform) CLI, CA certificates, a non-root user, a writable data
// directory, and a CLI configuration whose only provider source is a
// filesystem mirror holding this provider (and the providers of -providers
// directories), so that `init` and plans reach no registry. It writes a docker-archive tarball (podman load, docker load)
// and, with -push, pushes the image (an index of every -platform) to a
// registry with the credentials of ~/.docker/config.json, as ko and crane do.
//
// Layers go from the least to the most often changed (base files, CLI,
// the -providers, this provider), so a new provider version pulls one layer; files carry no
// timestamp and the image's is -epoch, so the same inputs give the same
// digests.
package main

import (
	"archive/tar"
	"bytes"
	"compress/gzip"
	"debug/elf"
	"encoding/json"
	"encoding/pem"
	"errors"
	"flag"
	"fmt"
	"io"
	"os"
	"path"
	"slices"
	"strings"
	"time"

	"github.com/google/go-containerregistry/pkg/authn"
	"github.com/google/go-containerregistry/pkg/name"
	v1 "github.com/google/go-containerregistry/pkg/v1"
	"github.com/google/go-containerregistry/pkg/v1/empty"
	"github.com/google/go-containerregistry/pkg/v1/mutate"
	"github.com/google/go-containerregistry/pkg/v1/remote"
	"github.com/google/go-containerregistry/pkg/v1/tarball"
	"github.com/google/go-containerregistry/pkg/v1/types"
	"golang.org/x/crypto/x509roots/fallback/bundle"
)

// Paths inside the image. The guide (templates/guides/companion-in-cluster.md.tmpl)
// and the chart name them too.
const (
	binDir       = "/usr/local/bin"
	providerPath = binDir + "/terraform-provider-k8s"
	cliConfig    = "/etc/terraform-provider-k8s/cli.tfrc"
	mirrorDir    = "/usr/share/terraform-provider-k8s/providers"
	caBundle     = "/etc/ssl/certs/ca-certificates.crt"
	configDir    = "/config"
	dataDir      = "/data"
	homeDir      = "/home/nonroot"
	uid          = 65532
)

type platformFlag []platform

type platform struct {
	arch, provider, cli string
}

func (p *platformFlag) String() string { return fmt.Sprint(*p) }

// Set takes ARCH=PROVIDER,CLI: amd64=bin/terraform-provider-k8s,/path/tofu.
func (p *platformFlag) Set(v string) error {
	arch, files, ok := strings.Cut(v, "=")
	provider, cli, ok2 := strings.Cut(files, ",")
	if !ok || !ok2 || arch == "" || provider == "" || cli == "" {
		return fmt.Errorf("-platform %q: give ARCH=PROVIDER_BINARY,CLI_BINARY", v)
	}
	*p = append(*p, platform{arch: arch, provider: provider, cli: cli})
	return nil
}

// dirsFlag is a repeated flag of directories.
type dirsFlag []string

func (d *dirsFlag) String() string { return strings.Join(*d, ",") }

func (d *dirsFlag) Set(v string) error {
	if v == "" {
		return errors.New("give a directory")
	}
	*d = append(*d, v)
	return nil
}

// hostsFlag is a repeated flag of registry hosts.
type hostsFlag []string

func (h *hostsFlag) String() string { return strings.Join(*h, ",") }

func (h *hostsFlag) Set(v string) error {
	if v == "" || strings.ContainsAny(v, "/ ") {
		return fmt.Errorf("%q: give a host name, such as the one scripts/registry-host.sh prints", v)
	}
	*h = append(*h, v)
	return nil
}

type options struct {
	platforms platformFlag
	providers dirsFlag
	// mirrorHosts are the hosts under which the image's mirror keeps this
	// provider (HOST/vigie/k8s/...): the default registry host of the CLI
	// in the image, the only CLI that reads that mirror, which means
	// HOST/vigie/k8s by `source = "vigie/k8s"`. The GNUmakefile asks it of
	// the CLI (scripts/registry-host.sh), so that no host is written here.
	mirrorHosts hostsFlag
	cliName     string
	version     string
	tag         string
	out         string
	push        string
	report      string
	epoch       int64
}

func main() {
	var o options
	flag.Var(&o.platforms, "platform", "ARCH=PROVIDER_BINARY,CLI_BINARY for linux/ARCH (repeat for a multi-platform push)")
	flag.Var(&o.providers, "providers", "a `DIR` laid out as a filesystem mirror (as tofu providers mirror DIR writes it, packed, or unpacked) whose providers for each -platform join the image's mirror (repeat for more)")
	flag.Var(&o.mirrorHosts, "mirror-host", "the `HOST` under which the image's mirror keeps this provider (HOST/vigie/k8s): the default registry host of the -platform's CLI, as scripts/registry-host.sh prints it (repeat for more)")
	flag.StringVar(&o.cliName, "cli-name", "tofu", "the CLI's name in the image: tofu or terraform")
	flag.StringVar(&o.version, "version", "", "the provider's version (the filesystem mirror's version directory)")
	flag.StringVar(&o.tag, "tag", "terraform-provider-k8s-sync:latest", "the image's name in the tarball")
	flag.StringVar(&o.out, "o", "", "write a docker-archive tarball here (one -platform)")
	flag.StringVar(&o.push, "push", "", "push the image (an index of every -platform) to this reference")
	flag.StringVar(&o.report, "report", "", "write the image's sizes (compressed, per layer) as JSON here")
	flag.Int64Var(&o.epoch, "epoch", 0, "the image's creation time, in Unix seconds (SOURCE_DATE_EPOCH)")
	flag.Parse()
	if err := run(o); err != nil {
		fmt.Fprintln(os.Stderr, "image:", err)
		os.Exit(1)
	}
}

func run(o options) error {
	switch {
	case len(o.platforms) == 0:
		return errors.New("give at least one -platform")
	case o.version == "":
		return errors.New("give -version, the provider's version")
	case len(o.mirrorHosts) == 0:
		return errors.New("give -mirror-host, the default registry host of the image's CLI (scripts/registry-host.sh CLI prints it)")
	case o.cliName != "tofu" && o.cliName != "terraform":
		return fmt.Errorf("-cli-name %q: use tofu or terraform", o.cliName)
	case o.out == "" && o.push == "":
		return errors.New("give -o, -push or both")
	case o.out != "" && len(o.platforms) > 1:
		return errors.New("-o writes one platform: give one -platform, or -push for several")
	}
	images := make([]v1.Image, 0, len(o.platforms))
	for _, p := range o.platforms {
		img, err := build(o, p)
		if err != nil {
			return fmt.Errorf("linux/%s: %w", p.arch, err)
		}
		images = append(images, img)
	}
	r, err := sizes(images[0])
	if err != nil {
		return err
	}
	fmt.Printf("image linux/%s: %d bytes compressed in %d layers:", o.platforms[0].arch, r.CompressedBytes, len(r.Layers))
	for _, l := range r.Layers {
		fmt.Printf(" %d (%d uncompressed)", l.CompressedBytes, l.UncompressedBytes)
	}
	fmt.Println()
	if o.report != "" {
		if err := writeReport(o.report, r); err != nil {
			return err
		}
	}
	if o.out != "" {
		tag, err := name.NewTag(o.tag)
		if err != nil {
			return fmt.Errorf("-tag %q: %w", o.tag, err)
		}
		if err := tarball.WriteToFile(o.out, tag, images[0]); err != nil {
			return err
		}
	}
	if o.push != "" {
		return push(o, images)
	}
	return nil
}

func push(o options, images []v1.Image) error {
	ref, err := name.ParseReference(o.push)
	if err != nil {
		return fmt.Errorf("-push %q: %w", o.push, err)
	}
	auth := remote.WithAuthFromKeychain(authn.DefaultKeychain)
	var index v1.ImageIndex = empty.Index
	index = mutate.IndexMediaType(index, types.OCIImageIndex)
	for i, img := range images {
		index = mutate.AppendManifests(index, mutate.IndexAddendum{
			Add:        img,
			Descriptor: v1.Descriptor{Platform: &v1.Platform{OS: "linux", Architecture: o.platforms[i].arch}},
		})
	}
	return remote.WriteIndex(ref, index, auth)
}

// build assembles the image of one platform.
func build(o options, p platform) (v1.Image, error) {
	for _, bin := range []string{p.provider, p.cli} {
		if err := checkStatic(bin, p.arch); err != nil {
			return nil, err
		}
	}
	// Files carry no time (as ko's and distroless's): a layer's digest is
	// that of its files alone, so an unchanged CLI keeps its layer from one
	// release to the next. The image's creation time is -epoch.
	when := time.Unix(0, 0).UTC()
	base, err := baseLayer(when)
	if err != nil {
		return nil, err
	}
	cli, err := layer(when, func(w *tarWriter) error {
		return w.file(binDir+"/"+o.cliName, p.cli, 0o755)
	})
	if err != nil {
		return nil, err
	}
	layers := []v1.Layer{base, cli}
	if len(o.providers) > 0 {
		others, err := layer(when, func(w *tarWriter) error {
			seen := map[string]string{}
			for _, dir := range o.providers {
				if err := addMirror(w, dir, p.arch, seen); err != nil {
					return fmt.Errorf("-providers %s: %w", dir, err)
				}
			}
			return nil
		})
		if err != nil {
			return nil, err
		}
		layers = append(layers, others)
	}
	provider, err := providerLayer(when, o, p)
	if err != nil {
		return nil, err
	}
	img, err := mutate.AppendLayers(mutate.MediaType(empty.Image, types.OCIManifestSchema1), append(layers, provider)...)
	if err != nil {
		return nil, err
	}
	img = mutate.ConfigMediaType(img, types.OCIConfigJSON)
	cfg, err := img.ConfigFile()
	if err != nil {
		return nil, err
	}
	cfg = cfg.DeepCopy()
	cfg.OS, cfg.Architecture = "linux", p.arch
	cfg.Created = v1.Time{Time: time.Unix(o.epoch, 0).UTC()}
	licences := "MPL-2.0"
	if o.cliName == "terraform" {
		licences = "MPL-2.0 AND BUSL-1.1" // Terraform since v1.6
	}
	cfg.Config = v1.Config{
		Entrypoint: []string{providerPath},
		Cmd:        []string{"sync"},
		User:       fmt.Sprintf("%d:%d", uid, uid),
		WorkingDir: configDir,
		Env: []string{
			"PATH=" + binDir,
			"HOME=" + homeDir,
			"TF_CLI_CONFIG_FILE=" + cliConfig,
			"K8S_SYNC_TERRAFORM=" + o.cliName,
			"CHECKPOINT_DISABLE=1",
			"TF_IN_AUTOMATION=1",
		},
		ExposedPorts: map[string]struct{}{"9464/tcp": {}},
		Labels: map[string]string{
			"org.opencontainers.image.title":       "terraform-provider-k8s-sync",
			"org.opencontainers.image.description": "The k8s provider's companion (sync, check) with " + o.cliName + ", no registry needed at run time",
			"org.opencontainers.image.version":     o.version,
			"org.opencontainers.image.source":      "https://github.com/vigie/terraform-provider-k8s",
			"org.opencontainers.image.licenses":    licences,
		},
	}
	return mutate.ConfigFile(img, cfg)
}

// providerLayer holds this provider: the entrypoint, and the image's mirror
// in its unpacked layout (HOST/NAMESPACE/TYPE/VERSION/OS_ARCH/) under each
// of -mirror-host, as hard links to the entrypoint: one copy of the binary.
func providerLayer(when time.Time, o options, p platform) (v1.Layer, error) {
	return layer(when, func(w *tarWriter) error {
		if err := w.file(providerPath, p.provider, 0o755); err != nil {
			return err
		}
		for _, host := range o.mirrorHosts {
			dir := path.Join(mirrorDir, host, "vigie", "k8s", o.version, "linux_"+p.arch)
			if err := w.link(path.Join(dir, "terraform-provider-k8s_v"+o.version), providerPath, 0o755); err != nil {
				return err
			}
		}
		return nil
	})
}

// baseLayer holds what a distroless static image holds, and the CLI
// configuration.
func baseLayer(when time.Time) (v1.Layer, error) {
	certs, err := caCertificates()
	if err != nil {
		return nil, err
	}
	return layer(when, func(w *tarWriter) error {
		for _, d := range []struct {
			path string
			mode int64
			uid  int
		}{
			{"/etc", 0o755, 0}, {"/etc/ssl", 0o755, 0}, {"/etc/ssl/certs", 0o755, 0},
			{"/etc/terraform-provider-k8s", 0o755, 0},
			{"/tmp", 0o1777, 0},
			{configDir, 0o755, 0},
			{dataDir, 0o755, uid},
			{"/home", 0o755, 0}, {homeDir, 0o700, uid},
		} {
			if err := w.dir(d.path, d.mode, d.uid); err != nil {
				return err
			}
		}
		files := []struct {
			path    string
			content []byte
		}{
			{"/etc/passwd", []byte("root:x:0:0:root:/root:/sbin/nologin\nnonroot:x:65532:65532:nonroot:" + homeDir + ":/sbin/nologin\n")},
			{"/etc/group", []byte("root:x:0:\nnonroot:x:65532:\n")},
			{"/etc/nsswitch.conf", []byte("hosts: files dns\n")},
			{caBundle, certs},
			{cliConfig, []byte(cliConfiguration)},
		}
		for _, f := range files {
			if err := w.bytes(f.path, f.content, 0o644); err != nil {
				return err
			}
		}
		return nil
	})
}

// cliConfiguration makes the mirror the only source of providers: a
// provider the configuration needs that is not in it fails `init` with the
// CLI's "provider not found" error, instead of a download. The image's
// build adds providers to the mirror (-providers).
const cliConfiguration = `# Providers come from the image's filesystem mirror only: init and plans
# never reach a registry. Build the image with more providers in it
# (make image IMAGE_PROVIDERS=DIR, DIR written by tofu providers mirror),
# or give another file in TF_CLI_CONFIG_FILE.
provider_installation {
  filesystem_mirror {
    path = "` + mirrorDir + `"
  }
}
disable_checkpoint = true
`

// caCertificates are Mozilla's roots as golang.org/x/crypto/x509roots
// carries them (pinned by go.sum, the same on every build machine), in PEM.
// The roots NSS trusts only with a constraint X.509 cannot carry (a
// distrust-after date) are left out.
func caCertificates() ([]byte, error) {
	var buf bytes.Buffer
	for root := range bundle.Roots() {
		if root.Constraint != nil {
			continue
		}
		if err := pem.Encode(&buf, &pem.Block{Type: "CERTIFICATE", Bytes: root.Certificate}); err != nil {
			return nil, err
		}
	}
	if buf.Len() == 0 {
		return nil, errors.New("no CA certificate in golang.org/x/crypto/x509roots/fallback/bundle")
	}
	return buf.Bytes(), nil
}

// checkStatic refuses a binary that cannot run on an empty base: not an ELF
// of the platform's machine, or dynamically linked.
func checkStatic(file, arch string) error {
	r, err := os.Open(file)
	if err != nil {
		return err
	}
	defer r.Close()
	return checkStaticELF(r, file, arch)
}

func checkStaticELF(r io.ReaderAt, file, arch string) error {
	f, err := elf.NewFile(r)
	if err != nil {
		return fmt.Errorf("%s: not a Linux executable: %w", file, err)
	}
	machines := map[string]elf.Machine{"amd64": elf.EM_X86_64, "arm64": elf.EM_AARCH64, "arm": elf.EM_ARM, "386": elf.EM_386}
	if want, ok := machines[arch]; ok && f.Machine != want {
		return fmt.Errorf("%s: built for %s, not %s", file, f.Machine, arch)
	}
	for _, p := range f.Progs {
		if p.Type == elf.PT_INTERP {
			return fmt.Errorf("%s: dynamically linked, it cannot run in an image without a libc: build it with CGO_ENABLED=0", file)
		}
	}
	return nil
}

// layer is a gzip-compressed tar layer, compressed once, in memory.
func layer(when time.Time, fill func(*tarWriter) error) (v1.Layer, error) {
	var compressed bytes.Buffer
	zw, err := gzip.NewWriterLevel(&compressed, gzip.BestCompression)
	if err != nil {
		return nil, err
	}
	w := &tarWriter{tw: tar.NewWriter(zw), when: when, dirs: map[string]bool{}}
	if err := fill(w); err != nil {
		return nil, err
	}
	if err := w.tw.Close(); err != nil {
		return nil, err
	}
	if err := zw.Close(); err != nil {
		return nil, err
	}
	b := compressed.Bytes()
	return tarball.LayerFromOpener(func() (io.ReadCloser, error) {
		return io.NopCloser(bytes.NewReader(b)), nil
	}, tarball.WithMediaType(types.OCILayer))
}

// tarWriter writes a layer's entries with fixed owners and times, and the
// parent directories of each file it has not written yet.
type tarWriter struct {
	tw   *tar.Writer
	when time.Time
	dirs map[string]bool
}

func (w *tarWriter) dir(p string, mode int64, owner int) error {
	w.dirs[p] = true
	return w.tw.WriteHeader(&tar.Header{Typeflag: tar.TypeDir, Name: strings.TrimPrefix(p, "/") + "/", Mode: mode,
		Uid: owner, Gid: owner, ModTime: w.when, Format: tar.FormatPAX})
}

func (w *tarWriter) parents(p string) error {
	var missing []string
	for d := path.Dir(p); d != "/" && !w.dirs[d]; d = path.Dir(d) {
		missing = append(missing, d)
	}
	slices.Reverse(missing)
	for _, d := range missing {
		if err := w.dir(d, 0o755, 0); err != nil {
			return err
		}
	}
	return nil
}

func (w *tarWriter) bytes(p string, content []byte, mode int64) error {
	if err := w.parents(p); err != nil {
		return err
	}
	if err := w.tw.WriteHeader(&tar.Header{Typeflag: tar.TypeReg, Name: strings.TrimPrefix(p, "/"), Mode: mode,
		Size: int64(len(content)), ModTime: w.when, Format: tar.FormatPAX}); err != nil {
		return err
	}
	_, err := w.tw.Write(content)
	return err
}

func (w *tarWriter) file(p, source string, mode int64) error {
	content, err := os.ReadFile(source)
	if err != nil {
		return err
	}
	return w.bytes(p, content, mode)
}

// link writes a hard link to target, with target's mode: some unpackers
// apply a link entry's mode to the file.
func (w *tarWriter) link(p, target string, mode int64) error {
	if err := w.parents(p); err != nil {
		return err
	}
	return w.tw.WriteHeader(&tar.Header{Typeflag: tar.TypeLink, Name: strings.TrimPrefix(p, "/"),
		Linkname: strings.TrimPrefix(target, "/"), Mode: mode, ModTime: w.when, Format: tar.FormatPAX})
}

// report is what -report writes, for make bench.
type report struct {
	CompressedBytes int64         `json:"compressed_bytes"`
	Layers          []layerReport `json:"layers"`
}

type layerReport struct {
	Digest            string `json:"digest"`
	CompressedBytes   int64  `json:"compressed_bytes"`
	UncompressedBytes int64  `json:"uncompressed_bytes"`
}

func sizes(img v1.Image) (report, error) {
	var r report
	layers, err := img.Layers()
	if err != nil {
		return r, err
	}
	for _, l := range layers {
		digest, err := l.Digest()
		if err != nil {
			return r, err
		}
		size, err := l.Size()
		if err != nil {
			return r, err
		}
		rc, err := l.Uncompressed()
		if err != nil {
			return r, err
		}
		n, err := io.Copy(io.Discard, rc)
		_ = rc.Close()
		if err != nil {
			return r, err
		}
		r.CompressedBytes += size
		r.Layers = append(r.Layers, layerReport{Digest: digest.String(), CompressedBytes: size, UncompressedBytes: n})
	}
	return r, nil
}

func writeReport(file string, r report) error {
	b, err := json.MarshalIndent(r, "", "  ")
	if err != nil {
		return err
	}
	return os.WriteFile(file, append(b, '\n'), 0o644)
}
