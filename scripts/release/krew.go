package main

import (
	"fmt"
	"os"
	"path/filepath"
	"regexp"
	"strings"

	"go.yaml.in/yaml/v3"
)

// The krew plugin manifest (https://krew.sigs.k8s.io/docs/developer-guide/plugin-manifest/).
// krew installs the archive's files under its store and links its bin as kubectl-<name> with
// the name's dashes made underscores: kubectl-gitops_reverser, the program name under which
// the binary runs the commands (ctl.PluginName), never the daemon.
const (
	krewAPIVersion   = "krew.googlecontainertools.github.com/v1alpha2"
	krewPluginName   = "gitops-reverser" // the manifest's file name must be this + ".yaml"
	krewManifestFile = krewPluginName + ".yaml"
	krewShort        = "See and decide what gitops-reverser mirrors and proposes"
	krewDescription  = `The commands of gitops-reverser, which mirrors a Kubernetes cluster into Git:
  status     the GitDestinations: Ready, last push, write-back, pending proposals
  proposals  list, diff, approve, reject or ignore the Proposals that edits in Git opened
  sync       a write-back run of a GitDestination now
  restore    recreate in the cluster what a folder of the mirror holds
They act as you: your kubeconfig, your credentials, your RBAC, never the daemon's identity.
`
	krewCaveats = `The commands need gitops-reverser running in the cluster (its CustomResourceDefinitions).
They act with your kubeconfig and RBAC, as kubectl does. Try:
  kubectl gitops-reverser status -A
`
)

// sha256Hex is the grammar of krew's sha256 field.
var sha256Hex = regexp.MustCompile(`^[a-f0-9]{64}$`)

// krewPlugin is a krew plugin manifest, its fields in the order people read them.
type krewPlugin struct {
	APIVersion string       `yaml:"apiVersion"`
	Kind       string       `yaml:"kind"`
	Metadata   krewMetadata `yaml:"metadata"`
	Spec       krewSpec     `yaml:"spec"`
}

// krewMetadata names the plugin.
type krewMetadata struct {
	Name string `yaml:"name"`
}

// krewSpec is what krew shows and installs.
type krewSpec struct {
	Version          string         `yaml:"version"`
	Homepage         string         `yaml:"homepage"`
	ShortDescription string         `yaml:"shortDescription"`
	Description      string         `yaml:"description"`
	Caveats          string         `yaml:"caveats,omitempty"`
	Platforms        []krewPlatform `yaml:"platforms"`
}

// krewPlatform is one archive and the os/arch it is for. Without files, krew installs every file
// of the archive (from "*" to "."): the binary, and a license once the archive holds one.
type krewPlatform struct {
	Selector krewSelector `yaml:"selector"`
	URI      string       `yaml:"uri"`
	Sha256   string       `yaml:"sha256"`
	Bin      string       `yaml:"bin"`
}

// krewSelector matches krew's os and arch labels (Go's GOOS and GOARCH, or KREW_OS and KREW_ARCH).
type krewSelector struct {
	MatchLabels map[string]string `yaml:"matchLabels"`
}

// writeKrewManifest writes <out>/gitops-reverser.yaml, a krew plugin manifest of version with one
// platform per archive, downloaded from downloadURL + "/" + its name, and returns its path.
func writeKrewManifest(out, version, downloadURL string, archives []binaryArchive) (string, error) {
	if err := checkSemver(version); err != nil {
		return "", err
	}
	platforms, err := krewPlatforms(strings.TrimSuffix(downloadURL, "/"), archives)
	if err != nil {
		return "", err
	}
	plugin := krewPlugin{
		APIVersion: krewAPIVersion,
		Kind:       "Plugin",
		Metadata:   krewMetadata{Name: krewPluginName},
		Spec: krewSpec{
			Version:          "v" + version,
			Homepage:         defaultSource,
			ShortDescription: krewShort,
			Description:      krewDescription,
			Caveats:          krewCaveats,
			Platforms:        platforms,
		},
	}
	b, err := yaml.Marshal(plugin)
	if err != nil {
		return "", fmt.Errorf("encode the krew manifest: %w", err)
	}
	path := filepath.Join(out, krewManifestFile)
	if err := os.WriteFile(path, b, 0o644); err != nil {
		return "", fmt.Errorf("write the krew manifest: %w", err)
	}
	return path, nil
}

// krewPlatforms is one platform of the manifest per archive, refusing what krew would: no
// archive, a digest that is not sha256, two archives for one os/arch.
func krewPlatforms(downloadURL string, archives []binaryArchive) ([]krewPlatform, error) {
	if len(archives) == 0 {
		return nil, fmt.Errorf("the krew manifest needs at least one archive")
	}
	if downloadURL == "" {
		return nil, fmt.Errorf("the krew manifest needs the URL the archives are downloaded from")
	}
	platforms := make([]krewPlatform, 0, len(archives))
	seen := map[string]bool{}
	for _, a := range archives {
		goos, goarch, err := splitPlatform(a.Platform)
		if err != nil {
			return nil, err
		}
		if seen[a.Platform] {
			return nil, fmt.Errorf("two archives for platform %s", a.Platform)
		}
		seen[a.Platform] = true
		if a.Digest.Algorithm != "sha256" || !sha256Hex.MatchString(a.Digest.Hex) {
			return nil, fmt.Errorf("archive %s: digest %q is not a sha256", a.Name, a.Digest)
		}
		if a.Name == "" || strings.ContainsAny(a.Name, "/?#") {
			return nil, fmt.Errorf("archive for %s: name %q is not a file name", a.Platform, a.Name)
		}
		platforms = append(platforms, krewPlatform{
			Selector: krewSelector{MatchLabels: map[string]string{"os": goos, "arch": goarch}},
			URI:      downloadURL + "/" + a.Name,
			Sha256:   a.Digest.Hex,
			Bin:      cliBinary,
		})
	}
	return platforms, nil
}
