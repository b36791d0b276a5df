"""The staff console's pages: server-rendered shells; live data comes from the API and the staff socket."""

from django.contrib.admin.views.decorators import staff_member_required
from django.http import HttpResponse


@staff_member_required
def index(request):
    return HttpResponse("Console")
