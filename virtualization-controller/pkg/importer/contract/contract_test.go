package contract

import (
	"errors"
	"fmt"
	"strings"
	"testing"
)

func TestExitCodesDistinct(t *testing.T) {
	seen := map[int]Reason{}
	for r, c := range exitCodes {
		if other, ok := seen[c]; ok {
			t.Errorf("%s and %s share exit code %d", r, other, c)
		}
		seen[c] = r
	}
	if ExitCode("Unheard") != ExitCode(ReasonInternal) {
		t.Error("an unknown reason is not Internal's code")
	}
}

func TestResultRoundTrip(t *testing.T) {
	cases := []struct {
		name string
		in   Result
	}{
		{"completed", Result{Reason: ReasonCompleted, Format: FormatQcow2, StoredSize: 1, UnpackedSize: 2, Digest: "sha256:ab", CDROM: true}},
		{"failed", Result{Reason: ReasonChecksumMismatch, Message: "the sha256 differs"}},
		{"long message", Result{Reason: ReasonSourceFailed, Message: strings.Repeat("é", 5000)}},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			b := tc.in.Marshal()
			if len(b) > MaxResultBytes {
				t.Fatalf("%d bytes", len(b))
			}
			got, err := ParseResult(b)
			if err != nil {
				t.Fatal(err)
			}
			if len(tc.in.Message) <= MaxResultBytes && got != tc.in {
				t.Fatalf("got %+v, want %+v", got, tc.in)
			}
			if got.Reason != tc.in.Reason {
				t.Fatalf("reason %s", got.Reason)
			}
		})
	}
	if _, err := ParseResult([]byte(`{"message":"x"}`)); err == nil {
		t.Error("a result without a reason parsed")
	}
}

func TestReasonOf(t *testing.T) {
	inner := Errorf(ReasonNotDiskImage, "text")
	for _, tc := range []struct {
		err  error
		want Reason
	}{
		{nil, ReasonCompleted},
		{errors.New("plain"), ReasonInternal},
		{inner, ReasonNotDiskImage},
		{fmt.Errorf("wrapped: %w", inner), ReasonNotDiskImage},
		{Errorf(ReasonDestinationFailed, "outer: %w", inner), ReasonDestinationFailed},
	} {
		if got := ReasonOf(tc.err); got != tc.want {
			t.Errorf("ReasonOf(%v) = %s, want %s", tc.err, got, tc.want)
		}
	}
}
