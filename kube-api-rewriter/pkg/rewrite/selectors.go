package rewrite

import (
	"strings"
)

// LabelSelector rewrites a label selector string (the labelSelector query
// parameter): keys of every requirement ("k", "!k", "k=v", "k==v", "k!=v",
// "k in (a,b)", "k notin (a,b)", "k>1", "k<1") and the values of keys with
// value rules. Spacing is kept.
func (rw *Rewriter) LabelSelector(d Direction, s string) (string, error) {
	if strings.TrimSpace(s) == "" {
		return s, nil
	}
	var b strings.Builder
	depth := 0
	start := 0
	changed := false
	flush := func(end int) error {
		req := s[start:end]
		nr, ok, err := rw.labelRequirement(d, req)
		if err != nil {
			return err
		}
		if ok {
			changed = true
		}
		b.WriteString(nr)
		return nil
	}
	for i := 0; i < len(s); i++ {
		switch s[i] {
		case '(':
			depth++
		case ')':
			depth--
			if depth < 0 {
				return "", errorf("label selector %q: unbalanced ')'", s)
			}
		case ',':
			if depth == 0 {
				if err := flush(i); err != nil {
					return "", err
				}
				b.WriteByte(',')
				start = i + 1
			}
		}
	}
	if depth != 0 {
		return "", errorf("label selector %q: unbalanced '('", s)
	}
	if err := flush(len(s)); err != nil {
		return "", err
	}
	if !changed {
		return s, nil
	}
	return b.String(), nil
}

func (rw *Rewriter) labelRequirement(d Direction, req string) (string, bool, error) {
	i := 0
	for i < len(req) && isSpace(req[i]) {
		i++
	}
	if i == len(req) {
		return req, false, nil
	}
	if req[i] == '!' {
		i++
		for i < len(req) && isSpace(req[i]) {
			i++
		}
	}
	ks := i
	for i < len(req) && !isSpace(req[i]) && !strings.ContainsRune("=!<>(),", rune(req[i])) {
		i++
	}
	key := req[ks:i]
	if key == "" {
		return "", false, errorf("label selector requirement %q: empty key", req)
	}
	var out strings.Builder
	changed := false
	out.WriteString(req[:ks])
	nk, ok := rw.rules.Key(d, key)
	origKey := key
	if ok {
		changed = true
		if d == Restore {
			origKey = nk
		}
	}
	out.WriteString(nk)
	rest := req[i:]
	if !rw.rules.HasValueRules(origKey) {
		out.WriteString(rest)
		return out.String(), changed, nil
	}
	// Rewrite the values: after an operator, or inside parentheses.
	j := 0
	for j < len(rest) && isSpace(rest[j]) {
		j++
	}
	rv := func(v string) string {
		tv := strings.TrimSpace(v)
		if tv == "" {
			return v
		}
		nv, ok := rw.rules.LabelValue(d, origKey, tv)
		if !ok {
			return v
		}
		changed = true
		lead := v[:strings.Index(v, tv)]
		return lead + nv + v[len(lead)+len(tv):]
	}
	switch {
	case strings.HasPrefix(rest[j:], "==") || strings.HasPrefix(rest[j:], "!="):
		out.WriteString(rest[:j+2])
		out.WriteString(rv(rest[j+2:]))
	case strings.HasPrefix(rest[j:], "="):
		out.WriteString(rest[:j+1])
		out.WriteString(rv(rest[j+1:]))
	default:
		o := strings.IndexByte(rest, '(')
		c := strings.LastIndexByte(rest, ')')
		if o < 0 || c < o {
			out.WriteString(rest)
			break
		}
		out.WriteString(rest[:o+1])
		vals := strings.Split(rest[o+1:c], ",")
		for k, v := range vals {
			if k > 0 {
				out.WriteByte(',')
			}
			out.WriteString(rv(v))
		}
		out.WriteString(rest[c:])
	}
	return out.String(), changed, nil
}

// FieldSelector rewrites a field selector string. Known fields:
// metadata.name of CRDs (plural.group) and APIServices (version.group),
// involvedObject.apiVersion / regarding.apiVersion (group), and
// involvedObject.kind / regarding.kind: with the apiVersion term of the same
// object the kind is renamed with its group. Without it the kind's group is
// unknown (kubectl describe sends name, namespace, kind and uid): a kind that a
// rule renames is then dropped when a uid term of the same object names the
// object anyway, so that its events are found whichever view its kind is in
// (VirtualMachine is a kind of kubevirt.io and of the friendly API). Other
// kind-only terms are kept as they are.
func (rw *Rewriter) FieldSelector(d Direction, ri RequestInfo, s string) (string, error) {
	if strings.TrimSpace(s) == "" {
		return s, nil
	}
	terms := splitUnescaped(s, ',')
	type term struct {
		key, op, val string
	}
	ts := make([]term, len(terms))
	groups := map[string]string{} // object prefix -> source group
	uids := map[string]bool{}     // object prefixes with a uid equality term
	for i, t := range terms {
		k, op, v, ok := splitFieldTerm(t)
		if !ok {
			return "", errorf("field selector %q: invalid term %q", s, t)
		}
		uv, err := unescapeFieldValue(v)
		if err != nil {
			return "", errorf("field selector %q: %v", s, err)
		}
		ts[i] = term{k, op, uv}
		if p, ok := strings.CutSuffix(strings.TrimSpace(k), ".apiVersion"); ok {
			g, _ := splitGV(uv)
			groups[p] = g
		}
		if p, ok := strings.CutSuffix(strings.TrimSpace(k), ".uid"); ok && op != "!=" {
			uids[p] = true
		}
	}
	drop := make([]bool, len(ts))
	changed := false
	for i, t := range ts {
		k := strings.TrimSpace(t.key)
		nv, ok := t.val, false
		switch {
		case k == "metadata.name" && ri.Group == "apiextensions.k8s.io" && ri.Resource == "customresourcedefinitions":
			nv, ok = rw.crdName(d, t.val)
		case k == "metadata.name" && ri.Group == "apiregistration.k8s.io" && ri.Resource == "apiservices":
			w := &walker{rw: rw, dir: d}
			nv, ok = w.rewriteString(rAPIServiceName, t.val, nil, nil)
		case strings.HasSuffix(k, ".apiVersion"):
			g, ver := splitGV(t.val)
			var ng string
			if ng, ok = rw.rules.Group(d, g); ok {
				nv = joinGV(ng, ver)
			}
		case strings.HasSuffix(k, ".kind"):
			p := strings.TrimSuffix(k, ".kind")
			if g, has := groups[p]; has {
				nv, ok = rw.rules.Kind(d, g, t.val)
			} else if uids[p] && t.op != "!=" && rw.rules.IsRuleKind(d, t.val) {
				drop[i], changed = true, true
			}
		}
		if ok {
			ts[i].val = nv
			changed = true
		}
	}
	if !changed {
		return s, nil
	}
	var b strings.Builder
	for i, t := range ts {
		if drop[i] {
			continue
		}
		if b.Len() > 0 {
			b.WriteByte(',')
		}
		b.WriteString(t.key)
		b.WriteString(t.op)
		b.WriteString(escapeFieldValue(t.val))
	}
	return b.String(), nil
}

func splitUnescaped(s string, sep byte) []string {
	var out []string
	start := 0
	for i := 0; i < len(s); i++ {
		switch s[i] {
		case '\\':
			i++
		case sep:
			out = append(out, s[start:i])
			start = i + 1
		}
	}
	return append(out, s[start:])
}

func splitFieldTerm(t string) (key, op, val string, ok bool) {
	for i := 0; i < len(t); i++ {
		switch t[i] {
		case '\\':
			i++
		case '!':
			if i+1 < len(t) && t[i+1] == '=' {
				return t[:i], "!=", t[i+2:], true
			}
		case '=':
			if i+1 < len(t) && t[i+1] == '=' {
				return t[:i], "==", t[i+2:], true
			}
			return t[:i], "=", t[i+1:], true
		}
	}
	return "", "", "", false
}

func unescapeFieldValue(v string) (string, error) {
	if strings.IndexByte(v, '\\') < 0 {
		return v, nil
	}
	var b strings.Builder
	for i := 0; i < len(v); i++ {
		if v[i] == '\\' {
			i++
			if i >= len(v) {
				return "", errorf("trailing backslash in %q", v)
			}
			switch v[i] {
			case '\\', ',', '=':
			default:
				return "", errorf("invalid escape in %q", v)
			}
		}
		b.WriteByte(v[i])
	}
	return b.String(), nil
}

func escapeFieldValue(v string) string {
	if !strings.ContainsAny(v, `\,=`) {
		return v
	}
	r := strings.NewReplacer(`\`, `\\`, `,`, `\,`, `=`, `\=`)
	return r.Replace(v)
}
