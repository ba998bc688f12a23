package placement

import (
	"strconv"
	"strings"
)

// lineDiff is the change from a to b as lines: "-", its number in a, ":" and the line for each
// line of a that b does not keep; "+", its number in b, ":" and the line for each line b adds; in
// the order a unified diff shows them. Every line not listed is the same in both, in the same
// order (a longest common subsequence).
func lineDiff(a, b string) []string {
	x, y := strings.SplitAfter(a, "\n"), strings.SplitAfter(b, "\n")
	lcs := make([][]int, len(x)+1)
	for i := range lcs {
		lcs[i] = make([]int, len(y)+1)
	}
	for i := len(x) - 1; i >= 0; i-- {
		for j := len(y) - 1; j >= 0; j-- {
			if x[i] == y[j] {
				lcs[i][j] = lcs[i+1][j+1] + 1
			} else {
				lcs[i][j] = max(lcs[i+1][j], lcs[i][j+1])
			}
		}
	}
	var out []string
	i, j := 0, 0
	for i < len(x) || j < len(y) {
		switch {
		case i < len(x) && j < len(y) && x[i] == y[j]:
			i, j = i+1, j+1
		case i < len(x) && (j == len(y) || lcs[i+1][j] >= lcs[i][j+1]):
			out = append(out, "-"+strconv.Itoa(i+1)+":"+x[i])
			i++
		default:
			out = append(out, "+"+strconv.Itoa(j+1)+":"+y[j])
			j++
		}
	}
	for k, l := range out {
		out[k] = strings.TrimSuffix(l, "\n")
	}
	return out
}
