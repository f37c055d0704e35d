"""Developer tools shipped with the source, not with the service or runner images: `ondemand
demo` (the whole loop on one machine) and its helpers. The GitHub sandbox is `sandbox/`."""
