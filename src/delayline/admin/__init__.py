"""The admin web page, served by the API at ``/ui``: static files, no CDN."""
