package main

// oDsync is 0: Windows has no O_DSYNC (the bench's capture rows need Linux or macOS).
const oDsync = 0
