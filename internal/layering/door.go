package layering

// Door is the package through which every file a user names is read and every file is written
// (internal/safefile): regular files only, a size limit per kind, atomic writes that never follow
// a link or replace an input. The door test walks the syntax of every non-test file outside it and
// fails on a call that opens, reads or writes a file by itself (DoorCalls), unless DoorExceptions
// lists it with its reason.
const Door = "internal/safefile"

// DoorCalls are the calls the door test refuses outside Door, by import path and function: the
// opens, whole-file reads and writes of the standard library, the copy into a file, the line
// scanners over a file, and the other opens that would block on a FIFO or read a device forever.
// A bufio scanner or reader is allowed over an in-memory reader (bytes.NewReader,
// strings.NewReader, bytes.Buffer) and over the standard streams.
var DoorCalls = map[string][]string{
	"os":          {"Open", "OpenFile", "Create", "ReadFile", "WriteFile"},
	"io/ioutil":   {"ReadFile", "WriteFile"},
	"io":          {"Copy", "CopyN", "CopyBuffer"},
	"bufio":       {"NewScanner", "NewReader", "NewReaderSize"},
	"archive/zip": {"OpenReader"},
	"syscall":     {"Open"},
}

// DoorException allows one call of DoorCalls in one file, with the reason.
type DoorException struct {
	// File is the path relative to the module root.
	File string
	// Call is the import path and the function, as DoorCalls names them ("os.ReadFile",
	// "archive/zip.OpenReader").
	Call string
	// Reason says why the file does not use the door (yet).
	Reason string
}

// DoorExceptions are the calls allowed outside Door, each with its reason. Every entry must still
// match a call (the test fails on an entry no call needs). None today.
var DoorExceptions = []DoorException{}
