package placement

import (
	"slices"
	"strings"
	"testing"
)

const web = "spec.template.spec.containers[name=web]"
const sidecar = "spec.template.spec.containers[name=sidecar]"

// TestEditChangesOnlyItsLines edits fixtures shaped like a team's repository and checks the
// exact lines the edit removes and adds: every other line of the file is the same, in place.
func TestEditChangesOnlyItsLines(t *testing.T) {
	tests := []struct {
		name string
		file string
		doc  int
		ops  []Op
		diff []string
	}{{
		name: "SetImageKeepsTheLineComment", // kubectl set image web=nginx:1.26
		file: "app.yaml",
		ops:  []Op{set(web+".image", "nginx:1.26")},
		diff: []string{
			"-23:        image: nginx:1.25 # pinned by the release",
			"+23:        image: nginx:1.26 # pinned by the release",
		},
	}, {
		name: "SetImageOfTheSecondContainerKeepsItsQuotes",
		file: "app.yaml",
		ops:  []Op{set(sidecar+".image", "busybox:1.37")},
		diff: []string{
			"-33:        image: 'busybox:1.36' # logs",
			"+33:        image: 'busybox:1.37' # logs",
		},
	}, {
		name: "ScaleReplacesTheNumber", // kubectl scale --replicas=5
		file: "app.yaml",
		ops:  []Op{set("spec.replicas", 5)},
		diff: []string{
			"-11:  replicas: 2 # scaled by hand",
			"+11:  replicas: 5 # scaled by hand",
		},
	}, {
		name: "ScaleAddsReplicasAfterTheLastKeyOfSpec",
		file: "api.yaml",
		ops:  []Op{set("spec.replicas", int64(3))},
		diff: []string{
			"+26:  replicas: 3",
		},
	}, {
		name: "EnvVarAddedToAContainerWithEnv",
		file: "app.yaml",
		ops:  []Op{set(web+".env[name=LOG].value", "debug")},
		diff: []string{
			"+32:        - name: LOG",
			"+33:          value: debug",
		},
	}, {
		name: "EnvVarAddedToAContainerWithoutEnv",
		file: "app.yaml",
		ops:  []Op{set(sidecar+".env[name=LOG].value", "debug")},
		diff: []string{
			"+36:        env:",
			"+37:        - name: LOG",
			"+38:          value: debug",
		},
	}, {
		name: "EnvVarAddedInTheIndentedStyle",
		file: "api.yaml",
		ops: []Op{
			set("spec.template.spec.containers[name=api].env[name=LOG]", map[string]any{"value": "debug"}),
			set("spec.template.spec.containers[name=proxy].env[name=LOG].value", "info"),
		},
		diff: []string{
			"+21:            - name: LOG",
			"+22:              value: debug",
			"+25:          env:",
			"+26:            - name: LOG",
			"+27:              value: info",
		},
	}, {
		name: "LabelAddedToLabels",
		file: "app.yaml",
		ops:  []Op{set("metadata.labels.team", "shop")},
		diff: []string{
			"+10:    team: shop",
		},
	}, {
		name: "LabelsAddedToADocumentWithout",
		file: "app.yaml",
		doc:  1,
		ops:  []Op{set("metadata.labels.team", "shop")},
		diff: []string{
			"+42:  labels:",
			"+43:    team: shop",
		},
	}, {
		name: "KeyRemovedWithItsValue",
		file: "app.yaml",
		ops:  []Op{del(web + ".ports")},
		diff: []string{
			"-24:        ports:",
			"-25:        - containerPort: 80",
			"-26:          name: http",
		},
	}, {
		name: "KeyRemovedKeepsTheCommentOfTheNextKey",
		file: "app.yaml",
		doc:  1,
		ops:  []Op{del("spec.selector")},
		diff: []string{
			"-43:  selector:",
			"-44:    app: web",
		},
	}, {
		name: "RemovingWhatIsNotThereChangesNothing",
		file: "app.yaml",
		ops:  []Op{del("spec.paused"), del(web + ".env[name=NOPE]"), del("metadata.annotations.x")},
	}, {
		name: "NamedItemRemoved",
		file: "app.yaml",
		ops:  []Op{del(web + ".env[name=MODE]")},
		diff: []string{
			"-28:        - name: MODE",
			"-29:          value: \"production\"",
		},
	}, {
		name: "LastItemRemovedLeavesAnEmptyList",
		file: "app.yaml",
		ops:  []Op{del(web + ".ports[containerPort=80]")},
		diff: []string{
			"-24:        ports:",
			"-25:        - containerPort: 80",
			"-26:          name: http",
			"+24:        ports: []",
		},
	}, {
		name: "LastKeyRemovedLeavesAnEmptyMapping",
		file: "app.yaml",
		ops:  []Op{del("spec.template.metadata.labels.app")},
		diff: []string{
			"-17:      labels:",
			"-18:        app: web",
			"+17:      labels: {}",
		},
	}, {
		name: "FirstKeyOfAnItemRemoved",
		file: "app.yaml",
		ops:  []Op{del(web + ".ports[containerPort=80].containerPort")},
		diff: []string{
			"-25:        - containerPort: 80",
			"-26:          name: http",
			"+25:        - name: http",
		},
	}, {
		name: "DoubleQuotedStaysDoubleQuoted",
		file: "app.yaml",
		ops:  []Op{set("metadata.labels.tier", "backend"), set(web+".env[name=MODE].value", "staging")},
		diff: []string{
			"-9:    tier: \"frontend\"",
			"+9:    tier: \"backend\"",
			"-29:          value: \"production\"",
			"+29:          value: \"staging\"",
		},
	}, {
		name: "SingleQuotedStaysSingleQuoted",
		file: "app.yaml",
		ops:  []Op{set(web+".env[name=GREETING].value", "it's me")},
		diff: []string{
			"-31:          value: 'hello'",
			"+31:          value: 'it''s me'",
		},
	}, {
		name: "BlockScalarReplacedByBlock",
		file: "app.yaml",
		doc:  2,
		ops:  []Op{set("data.motd", "Closed today.\nBack tomorrow.\n")},
		diff: []string{
			"-60:    Welcome to the shop.",
			"-61:    Mind the step.",
			"+60:    Closed today.",
			"+61:    Back tomorrow.",
		},
	}, {
		name: "BlockScalarReplacedByOneLine",
		file: "app.yaml",
		doc:  2,
		ops:  []Op{set("data.motd", "closed")},
		diff: []string{
			"-59:  motd: |",
			"-60:    Welcome to the shop.",
			"-61:    Mind the step.",
			"+59:  motd: closed",
		},
	}, {
		name: "OneLineReplacedByBlockKeepsItsComment",
		file: "app.yaml",
		doc:  2,
		ops:  []Op{set("data.grüße", "hallo\nservus")},
		diff: []string{
			"-63:  grüße: hallo # said at the door",
			"+63:  grüße: |- # said at the door",
			"+64:    hallo",
			"+65:    servus",
		},
	}, {
		name: "UnicodeBeforeTheTokenOnItsLine",
		file: "app.yaml",
		doc:  2,
		ops:  []Op{set("data.grüße", "servus")},
		diff: []string{
			"-63:  grüße: hallo # said at the door",
			"+63:  grüße: servus # said at the door",
		},
	}, {
		name: "FlowMappingWrittenAgainInFlow",
		file: "app.yaml",
		ops:  []Op{set(sidecar+".resources.limits.memory", "128Mi"), set(sidecar+".resources.requests.cpu", "10m")},
		diff: []string{
			"-35:        resources: {limits: {memory: 64Mi}}",
			"+35:        resources: {limits: {memory: 128Mi}, requests: {cpu: 10m}}",
		},
	}, {
		name: "FlowListKeepsItsQuotes",
		file: "app.yaml",
		ops:  []Op{set(sidecar+".args[2]", "sleep 1d")},
		diff: []string{
			"-34:        args: [\"sh\", \"-c\", \"tail -f /dev/null\"]",
			"+34:        args: [\"sh\", \"-c\", \"sleep 1d\"]",
		},
	}, {
		name: "SecondOfThreeDocuments",
		file: "app.yaml",
		doc:  1,
		ops:  []Op{set("spec.ports[name=http].port", 8080)},
		diff: []string{
			"-49:    port: 80",
			"+49:    port: 8080",
		},
	}, {
		name: "MappingSetKeyByKey",
		file: "app.yaml",
		ops: []Op{set(web, map[string]any{
			"name":  "web",
			"image": "nginx:1.27",
			"ports": []any{map[string]any{"containerPort": 80, "name": "http"}},
			"env": []any{
				map[string]any{"name": "MODE", "value": "production"},
				map[string]any{"name": "REGION", "value": "eu"},
				map[string]any{"name": "GREETING", "value": "hello"},
			},
		})},
		diff: []string{
			"-23:        image: nginx:1.25 # pinned by the release",
			"+23:        image: nginx:1.27 # pinned by the release",
			"+30:        - name: REGION",
			"+31:          value: eu",
		},
	}, {
		name: "ListOfScalarsOfAnotherLengthWrittenAgain",
		file: "api.yaml",
		ops: []Op{set("spec.template.spec.containers[name=api].args", []any{"--port", "8080"}),
			set("spec.template.spec.containers[name=api].args", []any{"--port", "9090", "-v"})},
		diff: []string{
			"+21:          args:",
			"+22:            - --port",
			"+23:            - \"9090\"",
			"+24:            - -v",
		},
	}}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			file := fixture(t, tt.file)
			out := MustEdit(t, file, tt.doc, tt.ops...)
			objects(t, out)
			if got := lineDiff(string(file), string(out)); !slices.Equal(got, tt.diff) {
				t.Errorf("diff:\n%s\nwant:\n%s", strings.Join(got, "\n"), strings.Join(tt.diff, "\n"))
			}
		})
	}
}
