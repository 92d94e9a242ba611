"""`juryflow view`: a local web app over the store, and the templates the static report shares."""
