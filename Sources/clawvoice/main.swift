// The clawvoice executable: everything it does lives in NodeRuntime, so tests reach it too.

import Foundation
import NodeRuntime
import WakeWord

BLASKernels.reexecIfGeneric()
let status = await CLI.main(Array(CommandLine.arguments.dropFirst()))
exit(status)
