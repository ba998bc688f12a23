// Package layout is the path scheme of the mirror: which file in Git holds which object
// (Path), and back (ParsePath). The watch writes objects at these paths, write-back maps the
// files people edit back to their objects, and the operator page links to them; none of them
// needs Git to agree on a path, so the rule lives here, apart from the Git side.
package layout

import (
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"path"
	"strings"
	"unicode/utf8"
)

// ClusterScoped is the folder name used instead of a namespace for cluster-scoped objects.
const ClusterScoped = "_cluster"

// Limits of the path rule.
const (
	// MaxComponent is the longest file or folder name Linux and macOS file systems accept: a
	// longer one is a valid Git tree, but every clone fails to check it out.
	MaxComponent = 255
	// ShortenedMarker separates the kept prefix of a shortened component from its hash. Escaping
	// never emits it raw, so a shortened name can never equal the path of another, real name.
	ShortenedMarker = '~'
	// hashDigits is 128 bits of SHA-256: two long names sharing a path would need a collision
	// that nobody can compute, not just one that is likely never to happen by chance.
	hashDigits = 32
	fileSuffix = ".yaml"
)

// Path is the file of an object in Git: versionless and kubectl-style, so an API version bump
// never moves a file, and safe to check out on Linux, macOS and Windows, so one object with an
// unusual name cannot break every clone of the repository:
//
//	{baseFolder}/{namespace | _cluster}/{resource}[.{group}]/{name}.yaml
//
// The rule, applied to every component it generates (baseFolder is the user's and kept as given,
// only cleaned):
//
//   - Escaping: the bytes A-Z a-z 0-9 . _ - stay as they are; every other byte is written %XX
//     (upper-case hex), e.g. "system:controller:x" → "system%3Acontroller%3Ax". Kubernetes names
//     never contain "%", so this is unambiguous and reversible, and DNS-style names (every
//     built-in kind) come out unchanged. Everything outside that short list is encoded, even
//     what many file systems accept: control characters, "\", space, <>:"|?*, "~" (kept free for
//     the marker below) and all non-ASCII (macOS would otherwise normalise it to another name).
//     Upper-case letters are kept, so two custom resources whose names differ only in case share
//     a file on a case-insensitive checkout (Windows, macOS); built-in kinds are lower-case.
//   - In the resource, "." is encoded too, so the first "." of {resource}.{group} splits it.
//   - A folder (namespace, resource.group) never starts with "." or "_" nor ends with ".": that
//     character is encoded, so no folder is ".", "..", hidden, or a namespace named "_cluster".
//   - Windows device names (CON, PRN, AUX, NUL, COM0-9, LPT0-9, any case, also with an extension
//     such as "con.yaml" or "nul.txt.yaml") get their first character encoded: "con" → "%63on".
//   - Length: a component longer than MaxComponent (255) bytes, e.g. a 253-character name plus
//     ".yaml", becomes the longest prefix of its escaped form that fits, cut between escaped
//     characters (never inside an escape or a UTF-8 character), then "~" and the first 32 hex
//     digits of the SHA-256 of the whole escaped component (without ".yaml"), then ".yaml" for
//     a file. The file still holds the full name; ParsePath reports such a path as shortened.
//
// A namespace of exactly "*", which no namespace can be, is kept as is: it is the wildcard
// folder of a Sync scope.
func Path(baseFolder, group, resource, namespace, name string) string {
	file := namespaceFolder(namespace) + "/" + kindFolder(group, resource) + "/" + fileName(name)
	base := cleanBase(baseFolder)
	if base == "" {
		return file
	}
	return base + "/" + file
}

func cleanBase(baseFolder string) string { return strings.Trim(path.Clean("/"+baseFolder), "/") }

func namespaceFolder(namespace string) string {
	switch namespace {
	case "":
		return ClusterScoped
	case "*":
		return namespace
	}
	if plain(namespace, isSafe) && fitsAsIs(namespace, true, "") {
		return namespace
	}
	return fit(folderSafe(escape(namespace, isSafe)), "")
}

func kindFolder(group, resource string) string {
	if plain(resource, isSafeInResource) && plain(group, isSafe) {
		folder := resource
		if group != "" {
			folder += "." + group
		}
		if fitsAsIs(folder, true, "") {
			return folder
		}
	}
	tokens := escape(resource, isSafeInResource)
	if group != "" {
		tokens = append(append(tokens, "."), escape(group, isSafe)...)
	}
	return fit(folderSafe(tokens), "")
}

func fileName(name string) string {
	if plain(name, isSafe) && fitsAsIs(name, false, fileSuffix) {
		return name + fileSuffix
	}
	return fit(deviceSafe(escape(name, isSafe)), fileSuffix)
}

// plain reports whether escaping leaves s as it is: every byte is safe.
func plain(s string, safe func(byte) bool) bool {
	for i := 0; i < len(s); i++ {
		if !safe(s[i]) {
			return false
		}
	}
	return true
}

// fitsAsIs reports whether the rule leaves c, a non-empty component of safe bytes only, as it is:
// no device name, no folder that starts with "." or "_" or ends with ".", short enough with its
// suffix. It spares the escaping of every DNS-style name (a mirror makes a path per change).
func fitsAsIs(c string, folder bool, suffix string) bool {
	if c == "" || len(c)+len(suffix) > MaxComponent {
		return false
	}
	if folder && (c[0] == '.' || c[0] == '_' || c[len(c)-1] == '.') {
		return false
	}
	stem, _, _ := strings.Cut(c, ".")
	return !isDeviceName(stem)
}

// isSafe reports the bytes every file system and Git host takes raw in a file name.
func isSafe(b byte) bool {
	return 'a' <= b && b <= 'z' || 'A' <= b && b <= 'Z' || '0' <= b && b <= '9' || b == '.' || b == '_' || b == '-'
}

func isSafeInResource(b byte) bool { return b != '.' && isSafe(b) }

// escape encodes s one character at a time, so a prefix of whole tokens never splits an escape
// or a UTF-8 character. An invalid UTF-8 byte is a token of its own.
func escape(s string, safe func(byte) bool) []string {
	tokens := make([]string, 0, len(s))
	for i := 0; i < len(s); {
		_, size := utf8.DecodeRuneInString(s[i:])
		if size == 1 && safe(s[i]) {
			tokens = append(tokens, s[i:i+1])
		} else {
			tokens = append(tokens, percent(s[i:i+size]))
		}
		i += size
	}
	return tokens
}

func percent(s string) string {
	const hexDigits = "0123456789ABCDEF"
	out := make([]byte, 0, 3*len(s))
	for i := 0; i < len(s); i++ {
		out = append(out, '%', hexDigits[s[i]>>4], hexDigits[s[i]&0xF])
	}
	return string(out)
}

// folderSafe encodes a leading "." or "_" and a trailing "." of a folder, then device names.
func folderSafe(tokens []string) []string {
	if n := len(tokens); n > 0 {
		if tokens[0] == "." || tokens[0] == "_" {
			tokens[0] = percent(tokens[0])
		}
		if tokens[n-1] == "." {
			tokens[n-1] = percent(tokens[n-1])
		}
	}
	return deviceSafe(tokens)
}

// deviceSafe encodes the first character of a Windows device name: Windows opens the device,
// not a file, for such a name whatever its extension.
func deviceSafe(tokens []string) []string {
	var stem strings.Builder
	for _, t := range tokens {
		if t == "." {
			break
		}
		stem.WriteString(t)
	}
	if isDeviceName(stem.String()) {
		tokens[0] = percent(tokens[0])
	}
	return tokens
}

// isDeviceName follows Microsoft's list of reserved names (COM¹ and the like cannot occur here:
// non-ASCII is always escaped).
func isDeviceName(stem string) bool {
	if len(stem) != 3 && len(stem) != 4 {
		return false
	}
	switch s := strings.ToUpper(stem); {
	case s == "CON" || s == "PRN" || s == "AUX" || s == "NUL":
		return true
	case len(s) == 4 && (s[:3] == "COM" || s[:3] == "LPT"):
		return '0' <= s[3] && s[3] <= '9'
	}
	return false
}

// fit returns the escaped component with its suffix, shortened when it exceeds MaxComponent.
func fit(tokens []string, suffix string) string {
	full := strings.Join(tokens, "")
	if len(full)+len(suffix) <= MaxComponent {
		return full + suffix
	}
	sum := sha256.Sum256([]byte(full))
	limit := MaxComponent - 1 - hashDigits - len(suffix)
	var prefix strings.Builder
	for _, t := range tokens {
		if prefix.Len()+len(t) > limit {
			break
		}
		prefix.WriteString(t)
	}
	return prefix.String() + string(ShortenedMarker) + hex.EncodeToString(sum[:])[:hashDigits] + suffix
}

// Errors of ParsePath; each comes wrapped with the path and what is wrong with it.
var (
	// ErrOutsideBaseFolder: the path is not below the base folder, so it belongs to no object
	// of this destination (a README, another destination's folder).
	ErrOutsideBaseFolder = errors.New("outside the base folder")
	// ErrNotObjectPath: the path is below the base folder but Path cannot have made it.
	ErrNotObjectPath = errors.New("not an object path")
)

// ObjectPath is what a path made by Path says about its object.
type ObjectPath struct {
	Namespace       string // "" for a cluster-scoped object
	Group, Resource string // Group is "" for the core API
	Name            string
	// Shortened reports that a component was too long to hold its value: the fields it stands
	// for are left empty. Read the object from the file and accept it only when Path of its
	// group, resource, namespace and name gives this path again.
	Shortened bool
}

// ParsePath is the inverse of Path, for write-back to map a file in Git to its object. It
// accepts only the exact path Path makes (so a hand-made "con.yaml" or "%3a" is rejected rather
// than mapped to an object whose file is elsewhere).
func ParsePath(baseFolder, p string) (ObjectPath, error) {
	rest := p
	if base := cleanBase(baseFolder); base != "" {
		var ok bool
		if rest, ok = strings.CutPrefix(p, base+"/"); !ok {
			return ObjectPath{}, fmt.Errorf("parse path %q: %w %q", p, ErrOutsideBaseFolder, base)
		}
	}
	parts := strings.Split(rest, "/")
	if len(parts) != 3 {
		return ObjectPath{}, fmt.Errorf("parse path %q: %w: %d folder levels below the base folder, want {namespace}/{resource}[.{group}]/{name}.yaml",
			p, ErrNotObjectPath, len(parts)-1)
	}
	var o ObjectPath
	for _, parse := range []func(*ObjectPath, string) error{parseNamespace, parseKind, parseName} {
		comp := parts[0]
		parts = parts[1:]
		if err := parse(&o, comp); err != nil {
			return ObjectPath{}, fmt.Errorf("parse path %q: %w: %q: %w", p, ErrNotObjectPath, comp, err)
		}
	}
	return o, nil
}

func parseNamespace(o *ObjectPath, comp string) error {
	switch {
	case comp == ClusterScoped:
		return nil
	case comp == "*":
		return errors.New("the wildcard folder of a scope is no namespace")
	case strings.IndexByte(comp, ShortenedMarker) >= 0:
		o.Shortened = true
		return checkShortened(comp, "")
	}
	ns, err := unescape(comp)
	if err == nil && namespaceFolder(ns) != comp {
		err = errNotCanonical
	}
	o.Namespace = ns
	return err
}

func parseKind(o *ObjectPath, comp string) error {
	if strings.IndexByte(comp, ShortenedMarker) >= 0 {
		o.Shortened = true
		return checkShortened(comp, "")
	}
	resource, group, _ := strings.Cut(comp, ".")
	var err error
	if o.Resource, err = unescape(resource); err != nil {
		return err
	}
	if o.Group, err = unescape(group); err != nil {
		return err
	}
	if o.Resource == "" {
		return errors.New("no resource")
	}
	if kindFolder(o.Group, o.Resource) != comp {
		return errNotCanonical
	}
	return nil
}

func parseName(o *ObjectPath, comp string) error {
	stem, ok := strings.CutSuffix(comp, fileSuffix)
	switch {
	case !ok:
		return errors.New("not a " + fileSuffix + " file")
	case stem == "":
		return errors.New("no name")
	case strings.IndexByte(stem, ShortenedMarker) >= 0:
		o.Shortened = true
		return checkShortened(comp, fileSuffix)
	}
	name, err := unescape(stem)
	if err == nil && fileName(name) != comp {
		err = errNotCanonical
	}
	o.Name = name
	return err
}

var errNotCanonical = errors.New("not written the way Path writes it")

// checkShortened checks the shape of a shortened component: escaped prefix, marker, hash, suffix.
// Whether the hash is right only the full value, from the file, can tell.
func checkShortened(comp, suffix string) error {
	stem, _ := strings.CutSuffix(comp, suffix)
	prefix, sum, _ := strings.Cut(stem, string(ShortenedMarker))
	if len(comp) > MaxComponent {
		return fmt.Errorf("%d bytes, longer than %d", len(comp), MaxComponent)
	}
	if len(sum) != hashDigits || strings.Trim(sum, "0123456789abcdef") != "" {
		return fmt.Errorf("shortened, but %q after %q is not %d hex digits", sum, string(ShortenedMarker), hashDigits)
	}
	_, err := unescape(prefix)
	return err
}

// unescape decodes %XX escapes and rejects bytes Path never writes raw.
func unescape(s string) (string, error) {
	var out strings.Builder
	for i := 0; i < len(s); i++ {
		switch c := s[i]; {
		case c == '%':
			if i+2 >= len(s) || unhex(s[i+1]) < 0 || unhex(s[i+2]) < 0 {
				return "", fmt.Errorf("bad escape %q at byte %d, want %%XX with upper-case hex digits", s[i:min(i+3, len(s))], i)
			}
			out.WriteByte(byte(unhex(s[i+1])<<4 | unhex(s[i+2])))
			i += 2
		case isSafe(c):
			out.WriteByte(c)
		default:
			return "", fmt.Errorf("byte %q at %d must be escaped", c, i)
		}
	}
	return out.String(), nil
}

func unhex(c byte) int {
	switch {
	case '0' <= c && c <= '9':
		return int(c - '0')
	case 'A' <= c && c <= 'F':
		return int(c-'A') + 10
	}
	return -1
}
