package main

import (
	"context"
	"encoding/json"

	"flag"
	"fmt"
	"io"
	"os"
	"path"
	"path/filepath"
	"strings"

	"github.com/google/go-containerregistry/pkg/authn"
	"github.com/google/go-containerregistry/pkg/name"
	v1 "github.com/google/go-containerregistry/pkg/v1"
	"github.com/google/go-containerregistry/pkg/v1/layout"
	"github.com/google/go-containerregistry/pkg/v1/remote"
)

// destination is where publish pushes a release: the image's and the chart's repositories.
type destination struct {
	Image, Chart string
	plainHTTP    bool // a registry on loopback, spoken to without TLS: the tools need a flag for it
}

// runPublish pushes a release made by release build to a registry, with the credentials of
// Docker's config file, and prints the digests and the commands that verify and install it.
func runPublish(ctx context.Context, args []string, stdout, stderr io.Writer) error {
	fs := flag.NewFlagSet("publish", flag.ContinueOnError)
	fs.SetOutput(stderr)
	from := fs.String("from", "bin/release", "the release's folder, as release build wrote it")
	registry := fs.String("registry", "", "the registry and owner to push to, e.g. ghcr.io/configbutler (default: the release's own)")
	if err := fs.Parse(args); err != nil {
		return err
	}
	if fs.NArg() > 0 {
		return fmt.Errorf("unexpected arguments %q", fs.Args())
	}
	var r releaseResult
	raw, err := os.ReadFile(filepath.Join(*from, releaseManifestFile))
	if err != nil {
		return fmt.Errorf("%w (make release writes it)", err)
	}
	if err := json.Unmarshal(raw, &r); err != nil {
		return fmt.Errorf("%s: %w", releaseManifestFile, err)
	}
	dst, err := destinationFor(&r, *registry)
	if err != nil {
		return err
	}
	if err := publish(ctx, *from, &r, dst, remote.WithContext(ctx), remote.WithAuthFromKeychain(authn.DefaultKeychain)); err != nil {
		return err
	}
	printPublished(stdout, *from, &r, dst)
	return nil
}

// destinationFor is where the release goes in registry (<registry>/<image name> and
// <registry>/charts/<chart name>), or where it was signed for when registry is empty.
func destinationFor(r *releaseResult, registry string) (destination, error) {
	if registry == "" {
		registry = path.Dir(r.Image.Repository)
	}
	registry = strings.TrimSuffix(strings.TrimPrefix(registry, "oci://"), "/")
	d := destination{Image: registry + "/" + path.Base(r.Image.Repository), Chart: registry + "/charts/" + path.Base(r.Chart.Repository)}
	repo, err := name.NewRepository(d.Image)
	if err != nil {
		return d, fmt.Errorf("registry %q: %w", registry, err)
	}
	d.plainHTTP = repo.Scheme() == "http"
	return d, nil
}

// publish pushes the image index with its platforms, the chart, the SBOM artifact and then the
// signatures and attestations, so nothing signed is ever missing what it signs.
func publish(ctx context.Context, dir string, r *releaseResult, dst destination, opts ...remote.Option) error {
	idx, err := fromLayout(dir, r.Image)
	if err != nil {
		return err
	}
	if err := pushIndex(dst.Image+":"+r.Image.Tag, idx, opts); err != nil {
		return err
	}
	for _, o := range []struct {
		obj  releaseObject
		repo string
		ref  string
	}{
		{r.Chart, dst.Chart, ":" + r.Chart.Tag},
		{r.SBOM, dst.Image, "@" + r.SBOM.Digest.String()},
	} {
		img, err := imageFromLayout(dir, o.obj.Layout, o.obj.Digest)
		if err != nil {
			return err
		}
		if err := pushImage(o.repo+o.ref, img, opts); err != nil {
			return err
		}
	}
	return pushSignatures(filepath.Join(dir, r.Signatures), dst, opts)
}

// pushSignatures pushes every manifest of the signatures layout under its tag, into the image's
// or the chart's repository.
func pushSignatures(dir string, dst destination, opts []remote.Option) error {
	sigs, err := layout.ImageIndexFromPath(dir)
	if err != nil {
		return fmt.Errorf("the signatures: %w", err)
	}
	m, err := sigs.IndexManifest()
	if err != nil {
		return err
	}
	for _, d := range m.Manifests {
		repo := map[string]string{"image": dst.Image, "chart": dst.Chart}[d.Annotations[repositoryAnnotation]]
		tag := d.Annotations[refNameAnnotation]
		if repo == "" || tag == "" {
			return fmt.Errorf("the signatures layout lists %s without a repository and tag", d.Digest)
		}
		img, err := sigs.Image(d.Digest)
		if err != nil {
			return err
		}
		if err := pushImage(repo+":"+tag, img, opts); err != nil {
			return err
		}
	}
	return nil
}

// fromLayout is the image index of the release's image layout.
func fromLayout(dir string, obj releaseObject) (v1.ImageIndex, error) {
	outer, err := layout.ImageIndexFromPath(filepath.Join(dir, obj.Layout))
	if err != nil {
		return nil, err
	}
	return outer.ImageIndex(obj.Digest)
}

// imageFromLayout is the manifest with digest d of the layout in dir/rel.
func imageFromLayout(dir, rel string, d v1.Hash) (v1.Image, error) {
	p, err := layout.ImageIndexFromPath(filepath.Join(dir, rel))
	if err != nil {
		return nil, err
	}
	return p.Image(d)
}

func pushIndex(ref string, idx v1.ImageIndex, opts []remote.Option) error {
	r, err := name.ParseReference(ref)
	if err != nil {
		return err
	}
	if err := remote.WriteIndex(r, idx, opts...); err != nil {
		return fmt.Errorf("push %s: %w", ref, err)
	}
	return nil
}

func pushImage(ref string, img v1.Image, opts []remote.Option) error {
	r, err := name.ParseReference(ref)
	if err != nil {
		return err
	}
	if err := remote.Write(r, img, opts...); err != nil {
		return fmt.Errorf("push %s: %w", ref, err)
	}
	return nil
}

// printPublished prints what was pushed, and the commands that verify and install it: each
// runs as printed, from the release's folder.
func printPublished(w io.Writer, dir string, r *releaseResult, dst destination) {
	image := dst.Image + "@" + r.Image.Digest.String()
	chart := dst.Chart + "@" + r.Chart.Digest.String()
	_, _ = fmt.Fprintf(w, "pushed\n  image  %s:%s@%s\n  chart  oci://%s:%s@%s\n  sbom   %s@%s (refers to the image)\n",
		dst.Image, r.Image.Tag, r.Image.Digest, dst.Chart, r.Chart.Tag, r.Chart.Digest, dst.Image, r.SBOM.Digest)
	_, _ = fmt.Fprintf(w, "  signatures and attestations: %s:%s, .att; %s:%s, .att\n",
		dst.Image, cosignTag(r.Image.Digest, "sig"), dst.Chart, cosignTag(r.Chart.Digest, "sig"))
	if r.Snapshot {
		_, _ = fmt.Fprintf(w, "  a snapshot: %s is not at the tag v%s\n", r.Revision, r.Version)
	}
	for _, c := range verifyCommands(dir, r, dst, image, chart) {
		_, _ = fmt.Fprintln(w, c)
	}
}

// verifyCommands are the commands printPublished prints, with the headings between them.
func verifyCommands(dir string, r *releaseResult, dst destination, image, chart string) []string {
	key := filepath.Join(dir, r.PublicKey)
	cosign := "cosign verify --key " + key + " --insecure-ignore-tlog"
	attest := "cosign verify-attestation --key " + key + " --insecure-ignore-tlog"
	helm := "helm install gitops-reverser oci://" + dst.Chart + " --version " + r.Chart.Tag +
		" --namespace gitops-reverser-system --create-namespace"
	if dst.plainHTTP {
		cosign += " --allow-http-registry"
		attest += " --allow-http-registry"
		helm += " --plain-http"
	}
	if dst.Image != r.Image.Repository {
		helm += " --set image.repository=" + dst.Image
	}
	checksums := filepath.Join(dir, checksumsFile)
	// The signature, not the Sigstore bundle beside it: cosign 2 verifies a bundle only with a
	// trusted root, which it fetches from Sigstore online even for a key; both read the signature
	// offline (cosign 3 calls --signature deprecated, but honours it).
	return []string{
		"verify (cosign 2.6 or later; signed with a key, in no transparency log):",
		"  " + cosign + " " + image,
		"  " + attest + " --type slsaprovenance1 " + image,
		"  " + attest + " --type spdxjson " + image,
		"  " + cosign + " " + chart,
		"  cosign verify-blob --key " + key + " --insecure-ignore-tlog --signature " + checksums + ".sig " + checksums,
		"install:",
		"  " + helm,
	}
}
