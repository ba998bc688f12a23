package placement

import (
	"bytes"
	"strings"
)

// ResolvingFiles lists the files that decide how an index of folder reads the documents of the
// file at p: the kustomizations (by every name kustomize reads one) and the Helm Chart.yaml of
// p's folder and of each folder above it, up to folder. An Index given these and p resolves p's
// namespaces, and whether p is a chart's template or a patch of a kustomization above it, as an
// index of the whole folder would; a kustomization in another branch of the tree that names p
// as a patch (../other/p.yaml) is not among them. Write-back reads one edited file this way,
// without indexing the folder. Nothing when p is not under folder.
func ResolvingFiles(folder, p string) []string {
	x := NewIndex(folder)
	if !x.within(p) {
		return nil
	}
	var out []string
	for dir := dirOf(p); ; dir = dirOf(dir) {
		for _, name := range append(kustomizationNames[:len(kustomizationNames):len(kustomizationNames)], "Chart.yaml") {
			out = append(out, strings.TrimPrefix(dir+"/"+name, "/"))
		}
		if dir == x.folder || dir == "" {
			return out
		}
	}
}

// DocumentLine is the line of file, counted from 1, on which the text of document doc (numbered
// as Document numbers them) begins; 0 when the file has no such document.
func DocumentLine(file []byte, doc int) int {
	s := spans(file)
	if doc < 0 || doc >= len(s) {
		return 0
	}
	return bytes.Count(file[:s[doc].start], []byte("\n")) + 1
}

// FileDocuments is p's object documents as an index of folder holding files reads them: files must
// hold p and the files ResolvingFiles names that exist. Patches and templates are left out,
// like Lookup leaves them out; problems are those of p alone (documents that do not parse, with
// the line in the file, and objects two documents of p declare).
func FileDocuments(folder, p string, files map[string][]byte) (docs []Indexed, problems []Problem) {
	x := NewIndex(folder)
	for q, data := range files {
		if q != p {
			x.Put(q, data)
		}
	}
	x.Put(p, files[p])
	for _, d := range x.At(p) {
		if !d.Patch {
			docs = append(docs, d)
		}
	}
	for _, pr := range x.Problems() {
		if pr.Path == p {
			problems = append(problems, pr)
		}
	}
	return docs, problems
}
