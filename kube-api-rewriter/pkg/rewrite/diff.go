package rewrite

import (
	"encoding/json"
	"fmt"
	"sort"
	"strconv"
	"strings"
)

// Change is one difference found by Diff. Path is a JSONPath-like location
// ("metadata.labels[\"kubevirt.io/foo\"]", "items[3].kind"); Old and New are
// short JSON renderings, empty when the value is absent on that side.
type Change struct {
	Path string
	Old  string
	New  string
}

var _ fmt.Stringer = Change{}

func (c Change) String() string {
	o, n := c.Old, c.New
	if o == "" {
		o = "(absent)"
	}
	if n == "" {
		n = "(absent)"
	}
	return c.Path + ": " + o + " -> " + n
}

// Diff returns up to max structural differences between two JSON documents,
// for debug logs. It decodes both documents and is meant for debugging only.
// A renamed map key shows as one removed and one added key.
func Diff(before, after []byte, max int) ([]Change, error) {
	var a, b any
	if err := json.Unmarshal(before, &a); err != nil {
		return nil, fmt.Errorf("rewrite: diff: before: %w", err)
	}
	if err := json.Unmarshal(after, &b); err != nil {
		return nil, fmt.Errorf("rewrite: diff: after: %w", err)
	}
	d := &differ{max: max}
	d.diff("", a, b, true, true)
	return d.out, nil
}

// FormatDiff renders changes one per line.
func FormatDiff(cs []Change) string {
	var sb strings.Builder
	for _, c := range cs {
		sb.WriteString(c.String())
		sb.WriteByte('\n')
	}
	return sb.String()
}

type differ struct {
	max int
	out []Change
}

func short(v any) string {
	b, _ := json.Marshal(v)
	if len(b) > 120 {
		return string(b[:117]) + "..."
	}
	return string(b)
}

func joinKey(p, k string) string {
	simple := k != ""
	for _, c := range k {
		if !(c == '_' || c >= 'a' && c <= 'z' || c >= 'A' && c <= 'Z' || c >= '0' && c <= '9') {
			simple = false
			break
		}
	}
	if simple {
		if p == "" {
			return k
		}
		return p + "." + k
	}
	return p + "[" + strconv.Quote(k) + "]"
}

func (d *differ) add(p string, a, b any, ha, hb bool) {
	if d.max > 0 && len(d.out) >= d.max {
		return
	}
	c := Change{Path: p}
	if ha {
		c.Old = short(a)
	}
	if hb {
		c.New = short(b)
	}
	if c.Path == "" {
		c.Path = "."
	}
	d.out = append(d.out, c)
}

func (d *differ) diff(p string, a, b any, ha, hb bool) {
	if d.max > 0 && len(d.out) >= d.max {
		return
	}
	switch av := a.(type) {
	case map[string]any:
		bv, ok := b.(map[string]any)
		if !ok {
			d.add(p, a, b, ha, hb)
			return
		}
		keys := make([]string, 0, len(av)+len(bv))
		for k := range av {
			keys = append(keys, k)
		}
		for k := range bv {
			if _, ok := av[k]; !ok {
				keys = append(keys, k)
			}
		}
		sort.Strings(keys)
		for _, k := range keys {
			x, hx := av[k]
			y, hy := bv[k]
			if hx && hy {
				d.diff(joinKey(p, k), x, y, true, true)
			} else {
				d.add(joinKey(p, k), x, y, hx, hy)
			}
		}
	case []any:
		bv, ok := b.([]any)
		if !ok {
			d.add(p, a, b, ha, hb)
			return
		}
		n := max(len(av), len(bv))
		for i := 0; i < n; i++ {
			ip := p + "[" + strconv.Itoa(i) + "]"
			switch {
			case i < len(av) && i < len(bv):
				d.diff(ip, av[i], bv[i], true, true)
			case i < len(av):
				d.add(ip, av[i], nil, true, false)
			default:
				d.add(ip, nil, bv[i], false, true)
			}
		}
	default:
		if short(a) != short(b) {
			d.add(p, a, b, ha, hb)
		}
	}
}
