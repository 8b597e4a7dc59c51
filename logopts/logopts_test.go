package logopts

import (
	"bytes"
	"context"
	"flag"
	"log/slog"
	"reflect"
	"strings"
	"testing"
)

func TestHandler(t *testing.T) {
	for _, tc := range []struct {
		name, level, format string
		// debugShown says whether a debug record is written; prefix is how the line starts.
		debugShown bool
		prefix     string
		err        string
	}{
		{name: "default", level: "info", format: "json", prefix: `{"time":`},
		{name: "debug text", level: "debug", format: "text", debugShown: true, prefix: "time="},
		{name: "error", level: "error", format: "json", prefix: `{"time":`},
		{name: "upper case level", level: "DEBUG", format: "json", debugShown: true, prefix: `{"time":`},
		{name: "bad level", level: "loud", format: "json", err: `--log-level "loud": want debug, info, warn or error`},
		{name: "empty level", level: "", format: "json", err: `--log-level "": want`},
		{name: "bad format", level: "info", format: "console", err: `--log-format "console": want json or text`},
	} {
		t.Run(tc.name, func(t *testing.T) {
			var buf bytes.Buffer
			h, err := Options{Level: tc.level, Format: tc.format}.Handler(&buf)
			if tc.err != "" {
				if err == nil || !strings.Contains(err.Error(), tc.err) {
					t.Fatalf("error %v, want %q", err, tc.err)
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			log := slog.New(h)
			log.Debug("dbg")
			if got := strings.Contains(buf.String(), "dbg"); got != tc.debugShown {
				t.Errorf("debug record written: %v, want %v", got, tc.debugShown)
			}
			buf.Reset()
			log.Error("boom")
			if !strings.HasPrefix(buf.String(), tc.prefix) || !h.Enabled(context.Background(), slog.LevelError) {
				t.Errorf("error record %q, want it to start with %q", buf.String(), tc.prefix)
			}
		})
	}
}

func TestBindAndArgs(t *testing.T) {
	o := Default()
	fs := flag.NewFlagSet("x", flag.ContinueOnError)
	o.Bind(fs)
	if err := fs.Parse([]string{"--log-level=debug"}); err != nil {
		t.Fatal(err)
	}
	if want := []string{"--log-level=debug", "--log-format=json"}; !reflect.DeepEqual(o.Args(), want) {
		t.Fatalf("args %q, want %q", o.Args(), want)
	}
	// What Args gives another program parses back to the same options.
	back := Default()
	fs = flag.NewFlagSet("y", flag.ContinueOnError)
	back.Bind(fs)
	if err := fs.Parse(o.Args()); err != nil || back != o {
		t.Fatalf("parsed back %+v (%v), want %+v", back, err, o)
	}
}

func TestValidate(t *testing.T) {
	for _, tc := range []struct {
		o   Options
		err string
	}{
		{o: Default()},
		{o: Options{Level: "warn", Format: "text"}},
		{o: Options{Level: "verbose", Format: "json"}, err: `--log-level "verbose"`},
		{o: Options{Level: "info", Format: ""}, err: `--log-format "": want json or text`},
	} {
		err := tc.o.Validate()
		if (tc.err == "") != (err == nil) || (err != nil && !strings.Contains(err.Error(), tc.err)) {
			t.Errorf("Validate(%+v) = %v, want %q", tc.o, err, tc.err)
		}
	}
}
