package vm

import "testing"

// FuzzRestartAwaitingChanges feeds the applied-spec annotation arbitrary text: an error or a list
// of changes, never a panic; each change has an operation and a path.
func FuzzRestartAwaitingChanges(f *testing.F) {
	spec := friendlyVM().Spec
	applied, err := MarshalAppliedSpec(&spec)
	if err != nil {
		f.Fatal(err)
	}
	for _, seed := range []string{applied, "{}", "null", `{"cpu":{"cores":"x"}}`, `{"nodeSelector":{"a/b~c":1}}`, "[", `{"runPolicy":"AlwaysOn"}`} {
		f.Add(seed)
	}
	f.Fuzz(func(t *testing.T, annotation string) {
		changes, err := RestartAwaitingChanges(annotation, &spec)
		if err != nil {
			return
		}
		for _, c := range changes {
			if c.Operation == "" || (c.Path == "" && c.Operation != "replace") {
				t.Fatalf("change %+v", c)
			}
		}
		if annotation == applied && len(changes) != 0 {
			t.Fatalf("the spec against itself: %+v", changes)
		}
	})
}
