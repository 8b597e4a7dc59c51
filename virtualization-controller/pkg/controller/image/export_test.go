package image

// HumanSize is humanSize, for the external tests.
var HumanSize = humanSize
