// Package contract is what the importer and the controller that runs it as a Pod agree on: the
// importer's flags and environment, the metrics it serves while it runs, and the JSON result it
// writes to its termination message path when it ends, with a reason and an exit code per failure.
//
// The controller builds the Pod from these names and reads the outcome back with ParseResult; the
// importer (cmd/importer) is the only other user. Nothing here does IO.
package contract

import (
	"encoding/json"
	"errors"
	"fmt"
)

// Flags of cmd/importer. Every flag can also be given as the environment variable EnvPrefix +
// the flag's name in upper case with '-' as '_' (source-url is D8V_IMPORTER_SOURCE_URL); a flag on
// the command line wins. Secrets (registry credentials) come as files, never as flags.
const (
	EnvPrefix = "D8V_IMPORTER_"

	// The source: exactly one of FlagSourceURL, FlagSourceImage, FlagSourceFile and
	// FlagSourceUploadAddress.
	FlagSourceURL      = "source-url"       // http:// or https:// URL of a disk image, maybe gz or xz
	FlagSourceImage    = "source-image"     // a container-disk image reference: the file under disk/ is the disk
	FlagSourceFile     = "source-file"      // a disk file or block device in the Pod (another disk's claim)
	FlagSourceCABundle = "source-ca-bundle" // file: PEM CAs trusted for the source (added to the system's)
	FlagSourceAuthFile = "source-auth-file" // file: a .dockerconfigjson for FlagSourceImage (an imagePullSecret)
	// FlagSourceUploadAddress is where the importer waits for a user's upload: a PUT or POST to
	// UploadPath with the header "Authorization: Bearer <the token in FlagUploadTokenFile>",
	// for at most FlagUploadTimeout (then ReasonUploadTimeout).
	FlagSourceUploadAddress = "source-upload-address"
	FlagUploadTokenFile     = "upload-token-file" // file: the one token the upload is accepted with
	FlagUploadTimeout       = "upload-timeout"    // how long to wait for the upload to begin (a Go duration)
	UploadPath              = "/upload"

	// FlagSourceTokenFile: file with the bearer token sent with FlagSourceURL's requests (an
	// exporter's, FlagExportTokenFile).
	FlagSourceTokenFile = "source-token-file"

	// An exporter serves one disk to one importer instead of importing: a VirtualDisk's claim
	// (its disk.img, or its block device) next to the claim, for an image made from the disk
	// (FlagExportFile); or the disk of an image in DVCR, in the module's namespace, for a disk or a
	// claim filled from the image in another namespace, which never sees DVCR's credentials
	// (FlagExportImage, read with FlagSourceAuthFile and FlagSourceCABundle, anew for each request).
	// It answers GET and HEAD of ExportPath bearing the token in FlagExportTokenFile (a file with
	// Range; an image's stream from its start, Range ignored), and serves until it is stopped. No
	// source or destination goes with it.
	FlagExportFile  = "export-file"
	FlagExportImage = "export-image"
	// FlagThenExport keeps what an import wrote to FlagDestinationFile (a file in the Pod's
	// scratch space) and then serves it as an exporter (FlagExportAddress, FlagExportTokenFile)
	// until it is stopped, with the staged disk in MetricStagedBytes: an upload to a VirtualDisk
	// without a size is staged so, and its claim, made of the size it turns out to have, is filled
	// from the export.
	FlagThenExport      = "then-export"
	FlagExportAddress   = "export-address"
	FlagExportTokenFile = "export-token-file"
	ExportPath          = "/export"

	// Checksums of the file at FlagSourceURL as it is served (before decompression), lower-case hex.
	// Any given is verified while the data streams; a mismatch fails with ReasonChecksumMismatch.
	FlagMD5    = "md5"
	FlagSHA1   = "sha1"
	FlagSHA256 = "sha256"
	FlagSHA512 = "sha512"

	// The destination: exactly one of FlagDestinationImage and FlagDestinationFile.
	FlagDestinationImage    = "destination-image"     // DVCR reference, e.g. dvcr.d8-virtualization.svc/cvi/ubuntu:latest
	FlagDestinationCABundle = "destination-ca-bundle" // file: PEM CA of DVCR's serving certificate
	FlagDestinationAuthFile = "destination-auth-file" // file: a .dockerconfigjson with DVCR's push credentials
	// FlagDestinationFile is a raw disk: a file (a Filesystem PVC's disk.img, created) or a block
	// device (a Block PVC's devicePath, written in place).
	FlagDestinationFile = "destination-file"
	// FlagCapacity is the disk's size: the most bytes the unpacked disk may have, and the size of
	// a destination file (a smaller image's disk.img grows to it, sparse); 0 means the size of
	// the block device, or no limit for a file. A larger image fails with ReasonTooLarge.
	FlagCapacity = "capacity"

	// FlagInspect learns the source's format and unpacked size (Result.UnpackedSize) without
	// storing it: no destination. It reads only the header where that tells the size (qcow2,
	// vmdk, an uncompressed raw disk's length), else the whole source.
	FlagInspect = "inspect"

	FlagScratchDir                = "scratch-dir"              // where images that need qemu-img are staged (default: the system's temp dir)
	FlagMetricsAddress            = "metrics-address"          // where Metrics are served (default DefaultMetricsAddress)
	FlagTerminationMessagePath    = "termination-message-path" // where Result goes (default DefaultTerminationMessagePath)
	FlagRetries                   = "retries"                  // attempts per request on transient network errors
	DefaultMetricsAddress         = ":8080"
	DefaultTerminationMessagePath = "/dev/termination-log"
	MetricsPath                   = "/metrics"
)

// Metrics served at MetricsPath while the importer runs (Prometheus text format).
const (
	// MetricReadBytes counts the bytes read from the source so far, as served (compressed).
	MetricReadBytes = "d8_virtualization_importer_read_bytes_total"
	// MetricSourceSizeBytes is the source's size as served, when known (Content-Length); absent otherwise.
	MetricSourceSizeBytes = "d8_virtualization_importer_source_size_bytes"
	// MetricProgressRatio is read/size, 0 to 1; 1 once the import is done. Absent while the size is unknown.
	MetricProgressRatio = "d8_virtualization_importer_progress_ratio"
	// MetricSpeedBytes is the download speed over the last few seconds, bytes per second.
	MetricSpeedBytes = "d8_virtualization_importer_speed_bytes_per_second"
	// MetricExportedBytes counts the bytes an exporter has sent.
	MetricExportedBytes = "d8_virtualization_exporter_sent_bytes_total"
	// MetricAverageSpeedBytes is the download speed since the start, bytes per second.
	MetricAverageSpeedBytes = "d8_virtualization_importer_average_speed_bytes_per_second"
	// MetricStagedBytes is, once a FlagThenExport import is staged and served, the staged disk's
	// unpacked size, labelled with LabelFormat (the source's) and LabelCDROM ("true" for an ISO).
	MetricStagedBytes = "d8_virtualization_importer_staged_unpacked_bytes"
	LabelFormat       = "format"
	LabelCDROM        = "cdrom"
)

// Reason says how an import ended. Each has its own exit code (ExitCode).
type Reason string

const (
	ReasonCompleted         Reason = "Completed"
	ReasonInvalidArguments  Reason = "InvalidArguments"  // flags: a programming error of the controller
	ReasonSourceUnreachable Reason = "SourceUnreachable" // connect, DNS or TLS failed (after retries)
	ReasonSourceNotFound    Reason = "SourceNotFound"    // HTTP 404/410, or no such image or tag
	ReasonSourceForbidden   Reason = "SourceForbidden"   // HTTP 401/403: credentials missing or wrong
	ReasonSourceFailed      Reason = "SourceFailed"      // any other HTTP error, or the stream broke for good
	ReasonUploadTimeout     Reason = "UploadTimeout"     // no upload began within FlagUploadTimeout
	ReasonChecksumMismatch  Reason = "ChecksumMismatch"
	ReasonNotDiskImage      Reason = "NotDiskImage"      // text, an archive, a truncated image ...
	ReasonUnsupportedFormat Reason = "UnsupportedFormat" // a disk format or compression the importer does not take, a backing file
	ReasonTooLarge          Reason = "TooLarge"          // the unpacked disk exceeds FlagCapacity
	ReasonDestinationFailed Reason = "DestinationFailed" // writing the file or pushing to DVCR failed
	ReasonInternal          Reason = "Internal"
)

var exitCodes = map[Reason]int{
	ReasonCompleted:         0,
	ReasonInvalidArguments:  2,
	ReasonSourceUnreachable: 10,
	ReasonSourceNotFound:    11,
	ReasonSourceForbidden:   12,
	ReasonSourceFailed:      13,
	ReasonUploadTimeout:     14,
	ReasonChecksumMismatch:  20,
	ReasonNotDiskImage:      21,
	ReasonUnsupportedFormat: 22,
	ReasonTooLarge:          23,
	ReasonDestinationFailed: 30,
	ReasonInternal:          1,
}

// ExitCode is the importer's exit status for r; an unknown reason is ReasonInternal's.
func ExitCode(r Reason) int {
	if c, ok := exitCodes[r]; ok {
		return c
	}
	return exitCodes[ReasonInternal]
}

// Disk formats in Result.Format: what the source held after decompression.
const (
	FormatRaw   = "raw"
	FormatQcow2 = "qcow2"
	FormatISO   = "iso"
	FormatVMDK  = "vmdk"
	FormatVDI   = "vdi"
)

// DiskDir is where a container-disk image holds its disk file, as KubeVirt's containerDisk.
const DiskDir = "disk/"

// Result is the JSON the importer writes to its termination message path. A failed import has
// Reason and Message only.
type Result struct {
	Reason  Reason `json:"reason"`
	Message string `json:"message,omitempty"`
	// Format of the source's disk after decompression (Format*). In DVCR every disk but an ISO is
	// stored as qcow2; a destination file is always raw.
	Format string `json:"format,omitempty"`
	// CDROM is true for an ISO 9660 image.
	CDROM bool `json:"cdrom,omitempty"`
	// StoredSize is the bytes the disk takes where it was stored: the disk file in DVCR, or the
	// blocks allocated for a destination file.
	StoredSize int64 `json:"storedSize,omitempty"`
	// UnpackedSize is the disk's virtual size: what a VM sees, and the least a PVC must hold.
	UnpackedSize int64 `json:"unpackedSize,omitempty"`
	// Digest is the manifest digest pushed to DVCR (sha256:...).
	Digest string `json:"digest,omitempty"`
	// SourceSize is the bytes read from the source, as served.
	SourceSize int64 `json:"sourceSize,omitempty"`
}

// MaxResultBytes is what kubelet keeps of a termination message.
const MaxResultBytes = 4096

// Marshal encodes r within MaxResultBytes, shortening Message if it must.
func (r Result) Marshal() []byte {
	for {
		b, err := json.Marshal(r)
		if err != nil { // a Result always marshals
			panic(err)
		}
		if len(b) <= MaxResultBytes || r.Message == "" {
			return b
		}
		cut := len(r.Message) - (len(b) - MaxResultBytes) - len("...")
		if cut < 0 {
			cut = 0
		}
		r.Message = r.Message[:cut] + "..."
	}
}

// ParseResult reads a termination message written by the importer.
func ParseResult(b []byte) (Result, error) {
	var r Result
	if err := json.Unmarshal(b, &r); err != nil {
		return Result{}, fmt.Errorf("importer result: %w", err)
	}
	if r.Reason == "" {
		return Result{}, errors.New("importer result: no reason")
	}
	return r, nil
}

// Error is a failure with its Reason. The importer's packages return it (wrapped or not); the
// message says what to fix.
type Error struct {
	Reason Reason
	Err    error
}

func (e *Error) Error() string { return e.Err.Error() }
func (e *Error) Unwrap() error { return e.Err }

// Errorf makes an *Error; %w in format wraps a cause as fmt.Errorf does.
func Errorf(reason Reason, format string, args ...any) error {
	return &Error{Reason: reason, Err: fmt.Errorf(format, args...)}
}

// ReasonOf is the Reason of the first *Error in err's chain, ReasonInternal if none, and
// ReasonCompleted for nil.
func ReasonOf(err error) Reason {
	if err == nil {
		return ReasonCompleted
	}
	var e *Error
	if errors.As(err, &e) {
		return e.Reason
	}
	return ReasonInternal
}
