// The clawvoice executable: everything it does lives in the CLI module (and the Daemon it runs),
// so tests reach it too.

import Foundation
import CLI
import WakeWord

BLASKernels.reexecIfGeneric()
let status = await CLI.main(Array(CommandLine.arguments.dropFirst()))
exit(status)
