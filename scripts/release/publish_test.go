package main

import (
	"bytes"
	"context"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/google/go-containerregistry/pkg/authn"
	"github.com/google/go-containerregistry/pkg/name"
	v1 "github.com/google/go-containerregistry/pkg/v1"
	"github.com/google/go-containerregistry/pkg/v1/mutate"
	"github.com/google/go-containerregistry/pkg/v1/remote"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/client-go/dynamic"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/configbutler/gitops-reverser/testenv"
)

// TestAPublishedReleaseIsVerifiedAndInstalled makes a release of a clean clone with a throwaway
// key, publishes it to a registry that wants a password (given by Docker's config file), and
// runs every command publish printed, as printed, with cosign 2 and 3 on a machine that reaches
// nothing but the registry: cosign verifies the image's signature, its SLSA provenance and SBOM
// attestations, the chart's signature and the signed checksums, and helm installs the chart from
// the registry into a control plane, pinned to the signed image. The same commands are refused
// with another key, and when one byte of the image has changed (an attacker who can write the
// registry copies the signatures to the changed image).
func TestAPublishedReleaseIsVerifiedAndInstalled(t *testing.T) {
	cosigns := everyCosign(t)
	rel := sharedRelease(t)
	out, r := rel.out, rel.result

	host, dockerConfig := authRegistry(t)
	t.Setenv("DOCKER_CONFIG", dockerConfig)
	var stdout, stderr bytes.Buffer
	if err := run(context.Background(), []string{"publish", "-from", out, "-registry", host + "/acme"}, &stdout, &stderr); err != nil {
		t.Fatalf("release publish: %v\n%s", err, stderr.String())
	}
	t.Logf("release publish:\n%s", stdout.String())
	env := append(offlineEnv(t), "DOCKER_CONFIG="+dockerConfig)

	verify := printedCommands(stdout.String(), "cosign")
	if len(verify) != 5 {
		t.Fatalf("publish printed %d cosign commands, want 5:\n%s", len(verify), stdout.String())
	}
	image := host + "/acme/gitops-reverser@" + r.Image.Digest.String()
	if !strings.Contains(verify[0], image) {
		t.Errorf("the first command %q does not verify the pushed image %s", verify[0], image)
	}
	changed := pushChangedImage(t, host+"/acme/gitops-reverser", r)
	for _, cosign := range cosigns {
		t.Run("cosign "+cosign.version, func(t *testing.T) {
			checkPrintedVerification(t, cosign.bin, env, verify, out, r, changed)
		})
	}
	installPrintedChart(t, stdout.String(), dockerConfig, host, r)
}

// checkPrintedVerification runs the cosign commands publish printed, for the release in out, with
// cosign: each succeeds, and each is refused with another key; the image's are refused for the
// image changed (with the signatures copied), and the checksums' for changed checksums.
func checkPrintedVerification(t *testing.T, cosign string, env, verify []string, out string, r *releaseResult, changed v1.Hash) {
	t.Helper()
	for _, c := range verify {
		if got, err := toolRun(t, cosign, env, c); err != nil {
			t.Errorf("%s\n%v\n%s", c, err, got)
		}
	}
	t.Run("another key is refused", func(t *testing.T) {
		_, otherPub := keyPair(t)
		for _, c := range verify {
			if got, err := toolRun(t, cosign, env, strings.ReplaceAll(c, " --key "+filepath.Join(out, publicKeyFile), " --key "+otherPub)); err == nil {
				t.Errorf("with another key: %s\nsucceeded:\n%s", c, got)
			}
		}
	})
	t.Run("a changed image is refused", func(t *testing.T) {
		for _, c := range verify[:3] {
			c = strings.ReplaceAll(c, r.Image.Digest.String(), changed.String())
			if got, err := toolRun(t, cosign, env, c); err == nil {
				t.Errorf("a changed image with the signatures copied: %s\nsucceeded:\n%s", c, got)
			}
		}
	})
	t.Run("changed checksums are refused", func(t *testing.T) {
		sums := filepath.Join(out, checksumsFile)
		raw, err := os.ReadFile(sums)
		if err != nil {
			t.Fatal(err)
		}
		changed := filepath.Join(t.TempDir(), checksumsFile)
		raw[0] ^= 1
		if err := os.WriteFile(changed, raw, 0o644); err != nil {
			t.Fatal(err)
		}
		if got, err := toolRun(t, cosign, env, strings.TrimSuffix(verify[4], sums)+changed); err == nil {
			t.Errorf("%s on changed checksums succeeded:\n%s", verify[4], got)
		}
	})
}

// pushChangedImage pushes the release's image with one byte of a platform's config changed (its
// version label 1.2.3 becomes 1.2.4), and copies the release's signature and attestations to
// the changed index's tags, as an attacker who can write the registry would. It returns the
// changed index's digest.
func pushChangedImage(t testing.TB, repo string, r *releaseResult) v1.Hash {
	t.Helper()
	opts := []remote.Option{remote.WithAuthFromKeychain(authn.DefaultKeychain)}
	idx, err := remote.Index(mustRef(t, repo+"@"+r.Image.Digest.String()), opts...)
	if err != nil {
		t.Fatal(err)
	}
	m, err := idx.IndexManifest()
	if err != nil {
		t.Fatal(err)
	}
	img, err := idx.Image(m.Manifests[0].Digest)
	if err != nil {
		t.Fatal(err)
	}
	cf, err := img.ConfigFile()
	if err != nil {
		t.Fatal(err)
	}
	cf = cf.DeepCopy()
	cf.Config.Labels["org.opencontainers.image.version"] = "1.2.4"
	if img, err = mutate.ConfigFile(img, cf); err != nil {
		t.Fatal(err)
	}
	changed := mutate.AppendManifests(mutate.RemoveManifests(idx, func(d v1.Descriptor) bool { return d.Digest == m.Manifests[0].Digest }),
		mutate.IndexAddendum{Add: img, Descriptor: v1.Descriptor{Platform: m.Manifests[0].Platform}})
	d, err := changed.Digest()
	if err != nil {
		t.Fatal(err)
	}
	if err := remote.WriteIndex(mustRef(t, repo+":changed"), changed, opts...); err != nil {
		t.Fatal(err)
	}
	for _, suffix := range []string{"sig", "att"} {
		genuine, err := remote.Image(mustRef(t, repo+":"+cosignTag(r.Image.Digest, suffix)), opts...)
		if err != nil {
			t.Fatal(err)
		}
		if err := remote.Write(mustRef(t, repo+":"+cosignTag(d, suffix)), genuine, opts...); err != nil {
			t.Fatal(err)
		}
	}
	return d
}

// installPrintedChart runs the helm install publish printed against a control plane, and finds
// the daemon's Deployment running the signed image, by digest, from the registry it was
// published to.
func installPrintedChart(t *testing.T, printed, dockerConfig, host string, r *releaseResult) {
	t.Helper()
	installs := printedCommands(printed, "helm")
	if len(installs) != 1 {
		t.Fatalf("publish printed %d helm commands, want 1:\n%s", len(installs), printed)
	}
	ctx := context.Background()
	bins, err := testenv.EnsureBinaries(ctx)
	if err != nil {
		t.Fatal(err)
	}
	cp, err := testenv.Start(ctx)
	if err != nil {
		t.Fatal(err)
	}
	defer cp.Stop()
	kubeconfig := filepath.Join(t.TempDir(), "kubeconfig")
	if err := cp.WriteKubeconfig(kubeconfig); err != nil {
		t.Fatal(err)
	}
	helmHome := t.TempDir()
	env := []string{"KUBECONFIG=" + kubeconfig, "HELM_REGISTRY_CONFIG=" + filepath.Join(dockerConfig, "config.json"),
		"HELM_CACHE_HOME=" + filepath.Join(helmHome, "cache"), "HELM_CONFIG_HOME=" + filepath.Join(helmHome, "config"),
		"HELM_DATA_HOME=" + filepath.Join(helmHome, "data")}
	if got, err := toolRun(t, bins.Helm, env, installs[0]); err != nil {
		t.Fatalf("%s\n%v\n%s", installs[0], err, got)
	}
	client := dynamic.NewForConfigOrDie(cp.AdminConfig())
	deploys, err := client.Resource(schema.GroupVersionResource{Group: "apps", Version: "v1", Resource: "deployments"}).
		Namespace("gitops-reverser-system").List(ctx, metav1.ListOptions{})
	if err != nil {
		t.Fatal(err)
	}
	want := host + "/acme/gitops-reverser:" + r.Version + "@" + r.Image.Digest.String()
	var images []string
	for _, d := range deploys.Items {
		containers, _, _ := unstructured.NestedSlice(d.Object, "spec", "template", "spec", "containers")
		for _, c := range containers {
			images = append(images, c.(map[string]any)["image"].(string))
		}
	}
	if len(images) == 0 || images[0] != want {
		t.Errorf("the installed chart runs %v, want %s", images, want)
	}
}

func mustRef(t testing.TB, s string) name.Reference {
	t.Helper()
	ref, err := name.ParseReference(s)
	if err != nil {
		t.Fatal(err)
	}
	return ref
}
