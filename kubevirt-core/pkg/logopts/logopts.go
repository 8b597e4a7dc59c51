// Package logopts is the log level and format every kubevirt-core program takes, --log-level
// (debug, info, warn or error) and --log-format (json or text): the chart's logLevel and
// logFormat, which virt-operator passes on to the components it installs, and virt-controller
// to the launchers. One slog handler serves a program's own logs and controller-runtime's.
package logopts

import (
	"flag"
	"fmt"
	"io"
	"log/slog"
)

// Options are a program's logging flags.
type Options struct {
	Level  string
	Format string
}

// Default is info, as JSON.
func Default() Options { return Options{Level: "info", Format: "json"} }

// Bind registers --log-level and --log-format on fs, with o's values as the defaults.
func (o *Options) Bind(fs *flag.FlagSet) {
	fs.StringVar(&o.Level, "log-level", o.Level, "debug, info, warn or error")
	fs.StringVar(&o.Format, "log-format", o.Format, "json or text")
}

// Args are the flags that give another program the same options.
func (o Options) Args() []string {
	return []string{"--log-level=" + o.Level, "--log-format=" + o.Format}
}

// Handler is the slog handler the options ask for, writing to w; a bad value is an error
// naming its flag.
func (o Options) Handler(w io.Writer) (slog.Handler, error) {
	var level slog.Level
	if err := level.UnmarshalText([]byte(o.Level)); err != nil {
		return nil, fmt.Errorf("--log-level %q: want debug, info, warn or error", o.Level)
	}
	opts := &slog.HandlerOptions{Level: level}
	switch o.Format {
	case "json":
		return slog.NewJSONHandler(w, opts), nil
	case "text":
		return slog.NewTextHandler(w, opts), nil
	}
	return nil, fmt.Errorf("--log-format %q: want json or text", o.Format)
}
