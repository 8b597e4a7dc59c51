// Package logopts is the log level and format every program of the module takes, --log-level
// (debug, info, warn or error) and --log-format (json or text): the chart's logLevel and
// logFormat. virt-operator passes them on to the core's components, virt-controller to the
// launchers, virtualization-controller to its importer Pods. One slog handler serves a
// program's own logs and controller-runtime's or klog's. It is a module of its own, with no
// dependencies, so that kubevirt-core, virtualization-controller and virtualization-api share
// the contract without importing each other.
package logopts

import (
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

// FlagSet is what Bind needs of a flag set: the standard library's *flag.FlagSet and
// spf13/pflag's both have it.
type FlagSet interface {
	StringVar(p *string, name, value, usage string)
}

// Bind registers --log-level and --log-format on fs, with o's values as the defaults.
func (o *Options) Bind(fs FlagSet) {
	fs.StringVar(&o.Level, "log-level", o.Level, "debug, info, warn or error")
	fs.StringVar(&o.Format, "log-format", o.Format, "json or text")
}

// Args are the flags that give another program the same options.
func (o Options) Args() []string {
	return []string{"--log-level=" + o.Level, "--log-format=" + o.Format}
}

// Validate says whether Handler would accept the options; the error names the bad flag.
func (o Options) Validate() error {
	_, err := o.Handler(io.Discard)
	return err
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
