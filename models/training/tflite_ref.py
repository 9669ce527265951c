"""Runs the two .tflite files of the pyopen-wakeword wheel with the TFLite C library the wheel
bundles: the reference that frontend.py (and through it the Swift front end) is checked against."""
import ctypes as C

import numpy as np


class TFLiteFrontEnd:
    def __init__(self):
        from pyopen_wakeword.openwakeword import OpenWakeWordFeatures
        self.f = OpenWakeWordFeatures.from_builtin()
        self.lib = self.f.lib

    def _run(self, interp, inp, out, x):
        x = np.ascontiguousarray(x, np.float32)
        self.lib.TfLiteTensorCopyFromBuffer(inp, x.ctypes.data_as(C.c_void_p), C.c_size_t(x.nbytes))
        self.lib.TfLiteInterpreterInvoke(interp)
        n = self.lib.TfLiteTensorByteSize(out)
        y = np.empty(n // 4, np.float32)
        self.lib.TfLiteTensorCopyToBuffer(out, y.ctypes.data_as(C.c_void_p), C.c_size_t(n))
        return y

    def mel_chunk(self, samples1760):
        """8 transformed mel frames (/10 + 2) of 1760 samples."""
        f = self.f
        y = self._run(f.mel_interpreter, f.mel_input_tensor, f.mel_output_tensor, np.asarray(samples1760, np.float32)[None])
        return (y / 10 + 2).reshape(-1, 32)

    def embedding(self, mel76):
        f = self.f
        return self._run(f.emb_interpreter, f.emb_input_tensor, f.emb_output_tensor, np.asarray(mel76, np.float32)[None, :, :, None])
