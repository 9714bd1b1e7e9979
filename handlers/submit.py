"""The public submit function: Mangum over the submit app, built once per sandbox."""

from mangum import Mangum

from core.http.submit_app import create_submit_app
from core.platform.services import Services
from core.platform.settings import production_settings

services = Services.from_settings(production_settings(), pool_max=2)
handler = Mangum(create_submit_app(services), lifespan="off")
