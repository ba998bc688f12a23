package main

import (
	"bytes"
	"cmp"
	"fmt"
	"maps"
	"os"
	"regexp"
	"runtime/debug"
	"slices"
	"strings"
	"time"

	v1 "github.com/google/go-containerregistry/pkg/v1"
	spdxjson "github.com/spdx/tools-golang/json"
	"github.com/spdx/tools-golang/spdx/v2/common"
	spdx "github.com/spdx/tools-golang/spdx/v2/v2_3"
)

// module is one Go module linked into the daemon, as its build info records it.
type module struct {
	Path, Version, Sum string
}

// moduleSet is what one binary's build info says it is made of.
type moduleSet struct {
	Main      string // the main module's path
	GoVersion string // e.g. go1.26.8: the standard library
	Deps      []module
}

// newModuleSet reads the modules of a binary's build info; a replaced module is listed as its
// replacement, the code that is really in the binary.
func newModuleSet(info *debug.BuildInfo) *moduleSet {
	s := &moduleSet{Main: info.Main.Path, GoVersion: info.GoVersion}
	for _, d := range info.Deps {
		if d.Replace != nil {
			d = d.Replace
		}
		s.Deps = append(s.Deps, module{Path: d.Path, Version: d.Version, Sum: d.Sum})
	}
	return s
}

// unionModules is every module any of the binaries links, once, sorted by path and version:
// the SBOM's packages and the provenance's dependencies.
func unionModules(sets []*moduleSet) []module {
	deps := map[module]bool{}
	for _, s := range sets {
		for _, d := range s.Deps {
			deps[d] = true
		}
	}
	return slices.SortedFunc(maps.Keys(deps), func(a, b module) int {
		return cmp.Or(cmp.Compare(a.Path, b.Path), cmp.Compare(a.Version, b.Version))
	})
}

const noAssertion = "NOASSERTION"

// sbomDocument is the SPDX 2.3 document of the image: the image (by its index digest) contains
// the daemon's module at the image's version, which depends on the standard library and every
// module any platform's binary links, sorted by path. Every field comes from the build, so the
// same build gives the same document.
func sbomDocument(o options, digest v1.Hash, sets []*moduleSet) (*spdx.Document, error) {
	if len(sets) == 0 {
		return nil, fmt.Errorf("no binaries")
	}
	for _, s := range sets {
		if s.Main != sets[0].Main || s.GoVersion != sets[0].GoVersion {
			return nil, fmt.Errorf("binaries of different programs or Go versions: %s %s and %s %s",
				s.Main, s.GoVersion, sets[0].Main, sets[0].GoVersion)
		}
	}
	sorted := unionModules(sets)

	ids := spdxIDs{}
	image := newPackage(ids.add("image"), o.Repository, o.Version, "CONTAINER",
		fmt.Sprintf("pkg:oci/%s@%s?repository_url=%s&tag=%s", lastElem(o.Repository), strings.ReplaceAll(digest.String(), ":", "%3A"), o.Repository, o.Version))
	image.PackageChecksums = []common.Checksum{{Algorithm: common.SHA256, Value: digest.Hex}}
	image.PackageDownloadLocation = o.Source
	daemon := newPackage(ids.add("go-module-"+sets[0].Main), sets[0].Main, o.Version, "APPLICATION", goPURL(sets[0].Main, o.Version))
	daemon.PackageDownloadLocation = o.Source
	stdlib := newPackage(ids.add("go-stdlib"), "stdlib", sets[0].GoVersion, "LIBRARY",
		goPURL("stdlib", strings.TrimPrefix(sets[0].GoVersion, "go")))
	doc := &spdx.Document{
		SPDXVersion:       spdx.Version,
		DataLicense:       spdx.DataLicense,
		SPDXIdentifier:    "DOCUMENT",
		DocumentName:      "gitops-reverser-" + o.Version,
		DocumentNamespace: o.Source + "/spdx/" + digest.Hex,
		CreationInfo: &spdx.CreationInfo{
			Creators: []common.Creator{{CreatorType: "Tool", Creator: "gitops-reverser-scripts-image"}},
			Created:  o.Created.UTC().Format(time.RFC3339),
		},
		Packages: []*spdx.Package{image, daemon, stdlib},
		Relationships: []*spdx.Relationship{
			relationship("DOCUMENT", common.TypeRelationshipDescribe, image.PackageSPDXIdentifier),
			relationship(image.PackageSPDXIdentifier, common.TypeRelationshipContains, daemon.PackageSPDXIdentifier),
			relationship(daemon.PackageSPDXIdentifier, common.TypeRelationshipDependsOn, stdlib.PackageSPDXIdentifier),
		},
	}
	for _, d := range sorted {
		version := cmp.Or(d.Version, "(devel)")
		p := newPackage(ids.add("go-module-"+d.Path+"-"+version), d.Path, version, "LIBRARY", goPURL(d.Path, version))
		if d.Sum != "" {
			p.PackageComment = "go.sum hash " + d.Sum
		}
		doc.Packages = append(doc.Packages, p)
		doc.Relationships = append(doc.Relationships,
			relationship(daemon.PackageSPDXIdentifier, common.TypeRelationshipDependsOn, p.PackageSPDXIdentifier))
	}
	return doc, nil
}

// writeSBOM writes the SBOM as indented SPDX JSON to path and returns its bytes.
func writeSBOM(path string, o options, digest v1.Hash, sets []*moduleSet) ([]byte, error) {
	doc, err := sbomDocument(o, digest, sets)
	if err != nil {
		return nil, err
	}
	var buf bytes.Buffer
	if err := spdxjson.Write(doc, &buf, spdxjson.Indent("  "), spdxjson.EscapeHTML(false)); err != nil {
		return nil, fmt.Errorf("write SBOM: %w", err)
	}
	if err := os.WriteFile(path, buf.Bytes(), 0o644); err != nil {
		return nil, err
	}
	return buf.Bytes(), nil
}

func newPackage(id common.ElementID, name, version, purpose, purl string) *spdx.Package {
	return &spdx.Package{
		PackageName:               name,
		PackageSPDXIdentifier:     id,
		PackageVersion:            version,
		PackageDownloadLocation:   noAssertion,
		FilesAnalyzed:             false,
		IsFilesAnalyzedTagPresent: true,
		PackageLicenseConcluded:   noAssertion,
		PackageLicenseDeclared:    noAssertion,
		PackageCopyrightText:      noAssertion,
		PrimaryPackagePurpose:     purpose,
		PackageExternalReferences: []*spdx.PackageExternalReference{{
			Category: common.CategoryPackageManager,
			RefType:  common.TypePackageManagerPURL,
			Locator:  purl,
		}},
	}
}

func relationship(a common.ElementID, kind string, b common.ElementID) *spdx.Relationship {
	return &spdx.Relationship{
		RefA:         common.DocElementID{ElementRefID: a},
		RefB:         common.DocElementID{ElementRefID: b},
		Relationship: kind,
	}
}

// goPURL is the package URL of a Go module (or of the standard library, named stdlib).
func goPURL(path, version string) string { return "pkg:golang/" + path + "@" + version }

func lastElem(path string) string { return path[strings.LastIndex(path, "/")+1:] }

// spdxIDs hands out SPDX element IDs (letters, digits, '.' and '-'), unique within a document.
type spdxIDs map[common.ElementID]bool

var spdxIDUnsafe = regexp.MustCompile(`[^A-Za-z0-9.-]+`)

func (ids spdxIDs) add(name string) common.ElementID {
	base := "Package-" + spdxIDUnsafe.ReplaceAllString(name, "-")
	id := common.ElementID(base)
	for n := 2; ids[id]; n++ {
		id = common.ElementID(fmt.Sprintf("%s-%d", base, n))
	}
	ids[id] = true
	return id
}
