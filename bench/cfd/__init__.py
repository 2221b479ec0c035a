"""The data side of the CFD flux-Jacobian benchmark: the tetrahedral box mesh and Jacobian layout
(mesh.py), the NumPy reference flux, Jacobians and assembly (reference.py), and the Roe flux as
zymo device functions with its hand-coded Jacobian (flux.py)."""
