package rewrite

import (
	"bytes"
	"encoding/json"
	"fmt"
	"io"
	"strings"
	"testing"
)

// Names to rename that hide where a fast path could miss them: JSON escapes (\u002e is '.', \/
// is '/'), a key that only differs from a renamed one in its escaping, and names split by the
// end of what a streamed reader has buffered.
const escapedList = `{"kind":"PodList","apiVersion":"v1","metadata":{"resourceVersion":"7"},"items":[` +
	`{"metadata":{"name":"a","labels":{"kubevirt\u002einternal.virtualization.deckhouse.io\/created-by":"u","app":"x"},` +
	`"ownerReferences":[{"apiVersion":"internal\u002evirtualization.deckhouse.io/v1","kind":"InternalVirtualization\u0056irtualMachineInstance","name":"a","uid":"1"}],` +
	`"finalizers":["kubevirt.internal.virtualization.deckhouse.io\u002ffin"]},"spec":{"nodeSelector":{"kubevirt.internal.virtualization.deckhouse.io/schedulable":"true"}}},` +
	`{"metadata":{"name":"b","annotations":{"kubevirt.io/stock":"y","note":"kubevirt.internal.virtualization.deckhouse.io/not-a-key"}},"spec":{"containers":[{"name":"c","env":[{"name":"X","value":"\"quoted\" \\ kubevirt.internal.virtualization.deckhouse.io"}]}]}},` +
	`{"metadata":{"name":"c","labels":{"app.kubernetes.io/managed-by":"virt-operator-internal-virtualization"}},"status":{"phase":"Running","n":12345}}` +
	`],"tail":[1,2.5e3,true,null]}`

// The component view of escapedList, by hand: escapes of rewritten strings come out plain.
const escapedListRestored = `{"kind":"PodList","apiVersion":"v1","metadata":{"resourceVersion":"7"},"items":[` +
	`{"metadata":{"name":"a","labels":{"kubevirt.io/created-by":"u","app":"x"},` +
	`"ownerReferences":[{"apiVersion":"kubevirt.io/v1","kind":"VirtualMachineInstance","name":"a","uid":"1"}],` +
	`"finalizers":["kubevirt.io/fin"]},"spec":{"nodeSelector":{"kubevirt.io/schedulable":"true"}}},` +
	`{"metadata":{"name":"b","annotations":{"preserved-original-kubevirt.io/stock":"y","note":"kubevirt.internal.virtualization.deckhouse.io/not-a-key"}},"spec":{"containers":[{"name":"c","env":[{"name":"X","value":"\"quoted\" \\ kubevirt.internal.virtualization.deckhouse.io"}]}]}},` +
	`{"metadata":{"name":"c","labels":{"app.kubernetes.io/managed-by":"virt-operator"}},"status":{"phase":"Running","n":12345}}` +
	`],"tail":[1,2.5e3,true,null]}`

func TestEscapedNames(t *testing.T) {
	got, err := rw.Restore([]byte(escapedList))
	if err != nil {
		t.Fatal(err)
	}
	if !jsonEqual(t, got, []byte(escapedListRestored)) {
		t.Fatalf("restore:\n%s", mustDiff([]byte(escapedListRestored), got))
	}
}

// chunkReader hands out its input in pieces of the given sizes (the last one repeats).
type chunkReader struct {
	b     []byte
	sizes []int
}

func (c *chunkReader) Read(p []byte) (int, error) {
	if len(c.b) == 0 {
		return 0, io.EOF
	}
	n := min(len(p), len(c.b), c.sizes[0])
	if len(c.sizes) > 1 {
		c.sizes = c.sizes[1:]
	}
	copy(p, c.b[:n])
	c.b = c.b[n:]
	return n, nil
}

// withStreamAhead runs f with ObjectStream keeping only n bytes buffered ahead, so that items
// keep running past the end of the buffer.
func withStreamAhead(n int, f func()) {
	old := streamAhead
	streamAhead = n
	defer func() { streamAhead = old }()
	f()
}

// TestObjectStreamSplitEverywhere cuts the input at every offset: a name to restore split by the
// end of the buffered input must be restored all the same, and the output must not depend on
// where the reads end.
func TestObjectStreamSplitEverywhere(t *testing.T) {
	want, err := rw.Restore([]byte(escapedList))
	if err != nil {
		t.Fatal(err)
	}
	// items that are numbers: a number cut by the end of the buffer may go on
	scalars := `{"kind":"List","apiVersion":"v1","items":[12345,-6.25e10,"kubevirt.io",{"apiVersion":"IG/v1","kind":"InternalVirtualizationVirtualMachine"},0]}`
	wantScalars, err := rw.Restore([]byte(r(scalars)))
	if err != nil {
		t.Fatal(err)
	}
	withStreamAhead(1, func() {
		for _, doc := range []struct{ in, want []byte }{{[]byte(escapedList), want}, {[]byte(r(scalars)), wantScalars}} {
			for cut := 1; cut < len(doc.in); cut++ {
				for _, sizes := range [][]int{{cut, len(doc.in)}, {cut, 1}, {cut, 7}} {
					var out bytes.Buffer
					err := rw.ObjectStream(Restore, &out, &chunkReader{b: doc.in, sizes: sizes}, Target{})
					if err != nil {
						t.Fatalf("reads of %v: %v", sizes, err)
					}
					if !bytes.Equal(out.Bytes(), doc.want) {
						t.Fatalf("reads of %v:\n%s", sizes, mustDiff(doc.want, out.Bytes()))
					}
				}
			}
		}
	})
	// the same with the default read-ahead and a list larger than it
	body := podList(60)
	want, err = rw.Restore(body)
	if err != nil {
		t.Fatal(err)
	}
	for _, sizes := range [][]int{{1 << 20}, {4096}, {1, 4093, 100000, 3}, {31 << 10}} {
		var out bytes.Buffer
		if err := rw.ObjectStream(Restore, &out, &chunkReader{b: body, sizes: sizes}, Target{}); err != nil {
			t.Fatalf("reads of %v: %v", sizes, err)
		}
		if !bytes.Equal(out.Bytes(), want) {
			t.Fatalf("reads of %v: output differs from Restore", sizes)
		}
	}
}

// TestObjectStreamMalformedSplit: a document cut or broken anywhere is an error, however the
// reads fall.
func TestObjectStreamMalformedSplit(t *testing.T) {
	withStreamAhead(1, func() {
		for cut := 1; cut < len(escapedList)-1; cut++ {
			in := []byte(escapedList[:cut])
			if err := rw.ObjectStream(Restore, io.Discard, &chunkReader{b: in, sizes: []int{cut / 2, 3}}, Target{}); err == nil {
				t.Fatalf("cut at %d: no error", cut)
			}
		}
		broken := strings.Replace(escapedList, `"n":12345`, `"n":12 345`, 1)
		if err := rw.ObjectStream(Restore, io.Discard, &chunkReader{b: []byte(broken), sizes: []int{5}}, Target{}); err == nil {
			t.Fatal("broken number: no error")
		}
	})
}

// TestWatchEventPrefix: every proper prefix of an event is short (never an error, never a
// result), and the whole event, followed by anything, is restored as WatchEvent restores it.
func TestWatchEventPrefix(t *testing.T) {
	events := []string{
		`{"type":"ADDED","object":{"apiVersion":"IG/v1","kind":"InternalVirtualizationVirtualMachine","metadata":{"name":"x","labels":{"IK/a":"b"}},"spec":{"n":[1,2.5,-3e2],"s":"\u0041\"\\"}}}`,
		`{"type":"DELETED","object":{"apiVersion":"kubevirt.io/v1","kind":"VirtualMachine","metadata":{"name":"stock"}}}`,
		`{"type":"ERROR","object":{"kind":"Status","apiVersion":"v1","status":"Failure","message":"internalvirtualizationvirtualmachines.IG \"x\" not found","code":404}}`,
		` {"type":"BOOKMARK","object":{"kind":"InternalVirtualizationVirtualMachine","apiVersion":"IG/v1","metadata":{"resourceVersion":"12"}}}`,
	}
	for _, e := range events {
		ev := []byte(r(e))
		want, wantDrop, err := rw.WatchEvent(Restore, nil, ev, Target{})
		if err != nil {
			t.Fatal(err)
		}
		for i := range len(ev) {
			out, n, drop, short, err := rw.WatchEventPrefix(Restore, []byte("x"), ev[:i], Target{})
			if !short || err != nil || n != 0 || drop || string(out) != "x" {
				t.Fatalf("prefix %q: short %v, err %v, n %d, out %q", ev[:i], short, err, n, out)
			}
		}
		for _, next := range []string{"", "\n", "\n{\"type\":", "{"} {
			out, n, drop, short, err := rw.WatchEventPrefix(Restore, []byte("x"), append(bytes.Clone(ev), next...), Target{})
			if short || err != nil || n != len(ev) || drop != wantDrop {
				t.Fatalf("%s + %q: short %v, err %v, n %d of %d, drop %v", ev, next, short, err, n, len(ev), drop)
			}
			if !wantDrop && string(out) != "x"+string(want) {
				t.Fatalf("%s: got %s, want %s", ev, out, want)
			}
		}
	}
	if _, _, _, short, err := rw.WatchEventPrefix(Restore, nil, []byte(`{"type":"ADDED","object":{"kind":}}`+"\n{"), Target{}); short || err == nil {
		t.Fatalf("malformed event: short %v, err %v", short, err)
	}
}

// TestKeyMemo: the memo of metadata keys gives what the rules give, in both directions, also when
// it fills up and starts over, and never hands out memory of an earlier input.
func TestKeyMemo(t *testing.T) {
	keys := append(append([]string{}, compKeys...), clusterKeys...)
	for i := range maxKeyMemo + 100 {
		keys = append(keys, fmt.Sprintf("k%d.example.com/x", i), fmt.Sprintf("n%d.node.virtualization.deckhouse.io/y", i))
	}
	for _, d := range []Direction{Rename, Restore} {
		var in bytes.Buffer
		in.WriteString(`{"metadata":{"labels":{`)
		for i, k := range keys {
			if i > 0 {
				in.WriteByte(',')
			}
			fmt.Fprintf(&in, "%q:%q", k, "v")
		}
		in.WriteString(`}}}`)
		src := bytes.Clone(in.Bytes())
		for round := range 2 {
			out, err := rw.Object(d, src, Target{})
			if err != nil {
				t.Fatal(err)
			}
			for _, k := range keys {
				want, _ := rw.rules.Key(d, k)
				if !bytes.Contains(out, []byte(fmt.Sprintf("%q:", want))) {
					t.Fatalf("%v round %d: key %q: want %q in the output", d, round, k, want)
				}
			}
			// what the walker remembered must not alias the input
			for i := range src {
				src[i] = ' '
			}
			src = bytes.Clone(in.Bytes())
		}
	}
}

// FuzzStream: ObjectStream with reads cut anywhere gives what Object gives, and rejects what it
// rejects.
func FuzzStream(f *testing.F) {
	f.Add([]byte(escapedList), uint16(100), uint8(3))
	f.Add([]byte(r(`{"kind":"List","apiVersion":"v1","items":[12345,-6.25e10,"kubevirt.io",{"apiVersion":"IG/v1","kind":"InternalVirtualizationVirtualMachine"},0]}`)), uint16(20), uint8(1))
	f.Add([]byte(`{"items":[{"metadata":{"labels":{"kubevirt.io":"x"}}}],"kind":"PodList"}`), uint16(9), uint8(2))
	old := streamAhead
	streamAhead = 1 // items keep running past the end of the buffer
	f.Cleanup(func() { streamAhead = old })
	f.Fuzz(func(t *testing.T, data []byte, first uint16, next uint8) {
		sizes := []int{int(first)%(len(data)+1) + 1, int(next)%16 + 1}
		for _, d := range []Direction{Rename, Restore} {
			want, err := rw.Object(d, data, Target{})
			var out bytes.Buffer
			serr := rw.ObjectStream(d, &out, &chunkReader{b: data, sizes: sizes}, Target{})
			if err != nil {
				// The stream checks what follows the document only as far as it has read, and
				// walks list items on their own, so that its nesting limit counts from each item.
				// Anything else Object rejects, the stream must reject too.
				var v any
				trailing := json.NewDecoder(bytes.NewReader(data)).Decode(&v) == nil
				nested := bytes.Count(data, []byte("{"))+bytes.Count(data, []byte("[")) >= maxDepth
				if serr == nil && !trailing && !nested {
					t.Fatalf("%v: stream accepted %q that Object rejects (%v)", d, data, err)
				}
				continue
			}
			if serr != nil {
				t.Fatalf("%v: reads of %v: stream rejected %q: %v", d, sizes, data, serr)
			}
			if !jsonEqual(t, out.Bytes(), want) {
				t.Fatalf("%v: reads of %v: stream %q, Object %q", d, sizes, out.Bytes(), want)
			}
		}
	})
}
